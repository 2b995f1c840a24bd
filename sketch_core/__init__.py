"""Provenance-based data skipping with incremental sketch maintenance for Spark.

The names below are imported on first use (PEP 562): ``import sketch_core.errors`` (or
parsing an Airflow DAG that uses the provider) must not load Spark, z3 or the service.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sketch_core.lazy import lazy_attributes

if TYPE_CHECKING:
    from sketch_core.config import Settings
    from sketch_core.errors import SketchError
    from sketch_core.layout.simulation import Layout
    from sketch_core.service import QueryResult, SketchService, SketchVersion
    from sketch_core.status import SketchStatus

__all__ = [
    "Layout",
    "QueryResult",
    "Settings",
    "SketchError",
    "SketchService",
    "SketchStatus",
    "SketchVersion",
]
__version__ = "0.1.0"

_HOMES = {
    "Settings": "sketch_core.config",
    "SketchError": "sketch_core.errors",
    "Layout": "sketch_core.layout.simulation",
    "QueryResult": "sketch_core.service",
    "SketchService": "sketch_core.service",
    "SketchVersion": "sketch_core.service",
    "SketchStatus": "sketch_core.status",
}


__getattr__ = lazy_attributes(__name__, _HOMES)
