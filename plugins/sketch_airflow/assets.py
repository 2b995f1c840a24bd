"""Airflow Assets for tables and sketches.

Loads declare the tables they write as outlets (``table_asset``), so capture and maintenance
DAGs can be scheduled on them. Every sketch version the operators publish is emitted as an
event of ``sketch_asset(name)`` (through the ``SKETCH_VERSIONS`` alias, since which sketches a
run publishes is known only when it runs), with the version and its commit sequence as extra.
A capture with a fixed name declares its sketch's asset directly instead: that makes the asset
known to Airflow when the DAG is parsed (active), so other DAGs can be scheduled on it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from airflow.sdk import Asset, AssetAlias

from sketch_core.tables.names import normalize_table_name

ASSET_GROUP = "sketch"
SKETCH_VERSIONS = AssetAlias(name="sketch_versions", group=ASSET_GROUP)


def table_asset(name: str) -> Asset:
    """The asset of an Iceberg table ``ns.table`` (what a load that writes it declares)."""
    table = normalize_table_name(name)
    return Asset(name=f"table {table}", uri=f"sketch://table/{table}", group=ASSET_GROUP)


def sketch_asset(name: str) -> Asset:
    """The asset of a sketch: an event per published version."""
    return Asset(name=f"sketch {name}", uri=f"sketch://sketch/{name}", group=ASSET_GROUP)


def emit_version(context: Any, outlets: Sequence[Any], name: str, version: int, sequence: int) -> None:
    """Record an event of ``sketch_asset(name)`` for a published version (when the task has
    the ``SKETCH_VERSIONS`` alias, or that asset, among its outlets)."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    if events is None:
        return
    extra = {"sketch": name, "version": version, "sequence": sequence}
    asset = sketch_asset(name)
    direct = [o for o in outlets if isinstance(o, Asset) and o.uri == asset.uri]
    if direct:  # Airflow emits the event of a declared outlet; it only needs the extra
        events[direct[0]].extra = extra
        return
    for outlet in outlets:
        if isinstance(outlet, AssetAlias) and outlet.name == SKETCH_VERSIONS.name:
            events[outlet].add(asset, extra=extra)


def emit_carried(context: Any, outlets: Sequence[Any], svc: Any, sequence: int) -> list[str]:
    """Emit an event per sketch version a rewrite committed at ``sequence`` carried to it
    (``svc.recluster`` publishes them; see ``SketchService.recluster``); their names."""
    carried = []
    for definition in svc.sketches.definitions():
        record = svc.sketches.version(definition.name)  # (None: a sketch never published)
        if record is not None and record.sequence == sequence:
            emit_version(context, outlets, record.name, record.version, sequence)
            carried.append(record.name)
    return carried
