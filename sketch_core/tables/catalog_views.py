"""The Iceberg views of the service's catalog, as Spark creates them (``CREATE VIEW lake.ns.v``).

Iceberg's JDBC catalog keeps a view beside the tables, in ``iceberg_tables`` with the type
``VIEW``, pointing at a metadata file (JSON, gzipped as Spark writes it) whose current version
holds the view's SQL, its schema and the catalog and namespace it was made in. PyIceberg's SQL
catalog lists tables only, so views are read here.
"""

from __future__ import annotations

import gzip
import json
from typing import Any

from pyiceberg.io import load_file_io
from sqlalchemy import Engine, text

from sketch_core.algebra.views import ViewDefinition
from sketch_core.errors import QueryError
from sketch_core.tables.names import split_table_name

_VIEW = text(
    """
    SELECT metadata_location FROM iceberg_tables
     WHERE catalog_name = :catalog AND iceberg_type = 'VIEW'
       AND lower(table_namespace) = :namespace AND lower(table_name) = :name
    """
)
# Spark's record of its query's output names (the view's own may differ: CREATE VIEW v (a, b)).
_QUERY_COLUMNS = "spark.query-column-names"


class CatalogViews:
    def __init__(self, engine: Engine, catalog: str) -> None:
        self.engine = engine
        self.catalog = catalog

    def definition(self, name: str) -> ViewDefinition | None:
        """The view ``ns.view`` as its current version defines it; None: no such view."""
        namespace, view = split_table_name(name)
        with self.engine.connect() as conn:
            # A catalog made before views existed has no type column: it holds no view.
            if not conn.dialect.has_table(conn, "iceberg_tables"):
                return None
            columns = {c["name"] for c in conn.dialect.get_columns(conn, "iceberg_tables")}
            if "iceberg_type" not in columns:
                return None
            location = conn.execute(
                _VIEW, {"catalog": self.catalog, "namespace": namespace, "name": view}
            ).scalar()
        if location is None:
            return None
        return parse_view_metadata(f"{namespace}.{view}", read_view_metadata(location))


def read_view_metadata(location: str) -> dict[str, Any]:
    try:
        raw = load_file_io(location=location).new_input(location).open().read()
        data: dict[str, Any] = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError) as exc:  # missing, unreadable, not gzip or not JSON
        raise QueryError(
            f"the view's metadata file {location} cannot be read: {exc}",
            hint="check the view in Spark (DESCRIBE EXTENDED), or recreate it",
        ) from exc
    return data


def parse_view_metadata(name: str, metadata: dict[str, Any]) -> ViewDefinition:
    """A view's metadata file (Iceberg's view spec) as its current version's definition."""
    versions = {v["version-id"]: v for v in metadata.get("versions", [])}
    version = versions.get(metadata.get("current-version-id"))
    if version is None:
        raise QueryError(f"view {name} has no current version in its metadata", hint="recreate it in Spark")
    sqls = [r for r in version.get("representations", []) if r.get("type") == "sql"]
    spark_sql = [r for r in sqls if str(r.get("dialect", "")).lower() == "spark"] or sqls
    if not spark_sql:
        raise QueryError(f"view {name} has no SQL the service can read", hint="recreate it in Spark")
    schemas = {s.get("schema-id"): s for s in metadata.get("schemas", [])}
    schema = schemas.get(version.get("schema-id"), {})
    query_columns = metadata.get("properties", {}).get(_QUERY_COLUMNS)
    namespace = version.get("default-namespace") or []
    return ViewDefinition(
        name=name,
        sql=spark_sql[0]["sql"],
        columns=tuple(f["name"] for f in schema.get("fields", [])),
        query_columns=tuple(query_columns.split(",")) if query_columns else None,
        default_catalog=version.get("default-catalog"),
        default_namespace=".".join(namespace) if namespace else None,
    )
