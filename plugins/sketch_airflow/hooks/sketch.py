"""``SketchMetastoreHook``: the connection to a sketch metastore, its warehouse and Spark.

Connection type ``sketch_metastore``: host, port, login, password and schema (the database)
name the PostgreSQL metastore; the extras name the warehouse and how Spark runs:

- ``warehouse``: the Iceberg warehouse path (required);
- ``spark_master``: ``local[2]`` (default) or any master URL, for in-process Spark;
- ``spark_conf``: extra Spark settings (an object of strings);
- ``spark_submit_conn_id``: when set, the Spark work (captures, and maintenance runs that need
  Spark) is spark-submitted through the Spark provider's hook with that connection, instead of
  running in the worker's process;
- ``settings``: any other field of :class:`sketch_core.config.Settings` by name (for example
  ``{"fragments": 1000, "target_file_bytes": 8388608}``).

Without a connection of the given id, the default id ``sketch_default`` falls back to the
``SKETCH_*`` environment variables (``SketchService.from_env``).
"""

from __future__ import annotations

import json
from dataclasses import fields, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from sqlalchemy import text

from sketch_airflow.hooks.submit import submit_job
from sketch_core.config import Settings
from sketch_core.errors import ConfigurationError
from sketch_core.metastore.engine import connect_metastore

if TYPE_CHECKING:
    from sketch_core.service import SketchService

CONN_TYPE = "sketch_metastore"
DEFAULT_CONN_ID = "sketch_default"


class SketchMetastoreHook(BaseHook):
    conn_name_attr = "sketch_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Sketch metastore"

    def __init__(self, sketch_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sketch_conn_id = sketch_conn_id
        self._service: SketchService | None = None

    # -- configuration -------------------------------------------------------------------------
    def get_settings(self) -> Settings:
        """The service's settings from the connection (or, for the default id without a
        connection, from the environment)."""
        try:
            conn = self.get_connection(self.sketch_conn_id)
        except AirflowNotFoundException:
            if self.sketch_conn_id != DEFAULT_CONN_ID:
                raise
            return Settings.from_env()
        extra = _extras(conn.extra, self.sketch_conn_id)
        base = Settings.from_env()
        warehouse = extra.get("warehouse")
        if not warehouse:
            raise ConfigurationError(
                f"connection {self.sketch_conn_id!r} names no warehouse",
                hint='add {"warehouse": "/path/to/warehouse"} to its extras',
            )
        spark_conf = extra.get("spark_conf") or {}
        if not isinstance(spark_conf, dict):
            raise ConfigurationError(
                f"connection {self.sketch_conn_id!r}: spark_conf must be an object of settings",
                hint='e.g. {"spark_conf": {"spark.executor.memory": "2g"}}',
            )
        configured = replace(
            base,
            metastore_url=metastore_url(conn.host, conn.port, conn.login, conn.password, conn.schema),
            warehouse=Path(str(warehouse)).expanduser(),
            spark_master=str(extra.get("spark_master") or base.spark_master),
            extra={**base.extra, **{str(k): str(v) for k, v in spark_conf.items()}},
        )
        return _with_overrides(configured, extra.get("settings") or {}, self.sketch_conn_id)

    def spark_submit_conn_id(self) -> str | None:
        """The Spark provider connection Spark jobs are submitted through (None: in-process)."""
        try:
            conn = self.get_connection(self.sketch_conn_id)
        except AirflowNotFoundException:
            return None
        value = _extras(conn.extra, self.sketch_conn_id).get("spark_submit_conn_id")
        return str(value) if value else None

    # -- the service ---------------------------------------------------------------------------
    def get_conn(self) -> SketchService:
        """The service over this connection's metastore and warehouse (one per hook); with a
        ``spark_submit_conn_id``, its Spark work is spark-submitted through that connection."""
        if self._service is None:
            from sketch_core.service import SketchService  # Spark and z3: when a task runs

            settings = self.get_settings()
            submit_conn = self.spark_submit_conn_id()
            submit = partial(submit_job, settings, submit_conn) if submit_conn is not None else None
            self._service = SketchService.from_settings(settings, submit=submit)
        return self._service

    def close(self) -> None:
        if self._service is not None:
            self._service.close()
            self._service = None

    def test_connection(self) -> tuple[bool, str]:
        """For the connection form's Test button: the metastore answers and the warehouse exists."""
        try:
            settings = self.get_settings()
            engine = connect_metastore(settings.require_metastore_url())
            try:
                with engine.connect() as conn:
                    conn.execute(text("SELECT 1"))
            finally:
                engine.dispose()
        except Exception as exc:
            return False, str(exc)
        if not settings.warehouse.is_dir():
            return False, f"the warehouse {settings.warehouse} does not exist"
        return True, "metastore reachable, warehouse present"


def metastore_url(
    host: str | None, port: int | None, login: str | None, password: str | None, database: str | None
) -> str:
    """A psycopg SQLAlchemy URL from connection fields (user and password quoted)."""
    if not host:
        raise ConfigurationError("the sketch connection has no host", hint="set the metastore's host")
    auth = ""
    if login:
        auth = quote(login, safe="")
        if password:
            auth += ":" + quote(password, safe="")
        auth += "@"
    where = f"{host}:{port}" if port else host
    return f"postgresql+psycopg://{auth}{where}/{quote(database or 'postgres', safe='')}"


_FIXED = frozenset({"metastore_url", "warehouse", "spark_master", "extra"})


def _with_overrides(settings: Settings, overrides: Any, conn_id: str) -> Settings:
    """``settings`` with the named fields replaced, each converted to the field's own type."""
    if not isinstance(overrides, dict):
        raise ConfigurationError(
            f"connection {conn_id!r}: settings must be an object",
            hint='e.g. {"settings": {"fragments": 1000}}',
        )
    known = {f.name for f in fields(Settings)} - _FIXED
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ConfigurationError(
            f"connection {conn_id!r}: unknown settings {', '.join(unknown)}",
            hint=f"known: {', '.join(sorted(known))}",
        )
    changes: dict[str, Any] = {}
    for name, value in overrides.items():
        kind = type(getattr(settings, name))
        try:
            changes[name] = (
                kind(value) if kind is not bool else str(value).lower() in ("1", "true", "on", "yes")
            )
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(
                f"connection {conn_id!r}: setting {name}={value!r} is not a {kind.__name__}",
                hint="fix the value",
            ) from exc
    return replace(settings, **changes)


def _extras(raw: str | dict[str, Any] | None, conn_id: str) -> dict[str, Any]:
    if not raw:
        return {}
    if isinstance(raw, dict):
        return raw
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ConfigurationError(
            f"connection {conn_id!r}: its extras are not JSON ({exc})", hint="fix the extras"
        ) from exc
    if not isinstance(value, dict):
        raise ConfigurationError(
            f"connection {conn_id!r}: its extras are not an object", hint="fix the extras"
        )
    return value
