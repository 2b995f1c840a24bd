"""Provider metadata for Airflow's providers manager (entry point ``apache_airflow_provider``):
the ``sketch_metastore`` connection type with its form fields, and the modules it ships."""

from __future__ import annotations

from typing import Any

from sketch_airflow import __version__


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "sketch-skipping",
        "name": "Provenance sketches",
        "description": "Provenance-based data skipping with incremental sketch maintenance for Spark "
        "reports over Iceberg tables.",
        "versions": [__version__],
        "integrations": [{"integration-name": "Provenance sketches", "tags": ["software"]}],
        "operators": [
            {
                "integration-name": "Provenance sketches",
                "python-modules": ["sketch_airflow.operators.sketch"],
            }
        ],
        "sensors": [
            {"integration-name": "Provenance sketches", "python-modules": ["sketch_airflow.sensors.policy"]}
        ],
        "triggers": [
            {"integration-name": "Provenance sketches", "python-modules": ["sketch_airflow.triggers.policy"]}
        ],
        "hooks": [
            {"integration-name": "Provenance sketches", "python-modules": ["sketch_airflow.hooks.sketch"]}
        ],
        "connection-types": [
            {
                "hook-class-name": "sketch_airflow.hooks.sketch.SketchMetastoreHook",
                "hook-name": "Sketch metastore",
                "connection-type": "sketch_metastore",
                "ui-field-behaviour": {
                    "hidden-fields": ["extra"],
                    "relabeling": {"schema": "Database", "host": "Metastore host"},
                    "placeholders": {"host": "localhost", "port": "5432", "schema": "sketches"},
                },
                "conn-fields": {
                    "warehouse": {
                        "label": "Warehouse",
                        "description": "Path of the Iceberg warehouse (data and sketch state files).",
                        "schema": {"type": ["string", "null"]},
                    },
                    "spark_master": {
                        "label": "Spark master",
                        "description": "local[2] (default), or a master URL such as spark://host:7077.",
                        "schema": {"type": ["string", "null"], "default": "local[2]"},
                    },
                    "spark_submit_conn_id": {
                        "label": "Spark submit connection",
                        "description": "A Spark connection: capture jobs are spark-submitted through it "
                        "instead of running in the worker.",
                        "schema": {"type": ["string", "null"]},
                    },
                },
            }
        ],
    }
