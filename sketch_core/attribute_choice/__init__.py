"""Cost-based choice of the sketch attribute (CBS): stratified samples and selectivity estimates."""
