"""Private services for the demo, the tests and CI (a PostgreSQL server on loopback)."""
