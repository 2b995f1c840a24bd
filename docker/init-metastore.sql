-- The sketch metastore lives in its own database beside Airflow's; the project's migrations
-- create its schema on first use.
CREATE DATABASE sketches OWNER airflow;
