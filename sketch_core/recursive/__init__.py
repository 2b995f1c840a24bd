"""Recursive views (``WITH RECURSIVE``) maintained with absorption provenance (Liu et al.,
"Recursive Computation of Regions and Connectivity in Networks"): pure logic, no I/O."""
