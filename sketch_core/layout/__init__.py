"""Table layouts for the reports: where a sketch lets the reader skip files, and how to get there."""
