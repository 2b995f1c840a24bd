"""Examples that use the project as a user would; not part of the installed package.

- :mod:`.airflow_demo`: ``make demo``'s story through a local Airflow and the example DAGs.
"""
