"""``SketchService``: the public entry point over one metastore and warehouse.

The facade (:mod:`.facade`) is composed of parts, each in its own module and given what it
uses in its constructor:

- :mod:`.context`: settings, repositories, tables, the lazy Spark session, and lookups;
- :mod:`.partition_store`: the stored range partitions and the versions read through them;
- :mod:`.engines`: building incremental engines, and the cache that keeps them in memory;
- :mod:`.attributes`: which attribute to sketch each table on (safety, estimates);
- :mod:`.capture`: capturing a sketch on Spark and publishing it;
- :mod:`.validation`: the delta-batch gate that maintenance passes through;
- :mod:`.lifecycle`: garbage collection, dropping sketches and tables;
- :mod:`.maintenance`: bringing sketches to newer snapshots (incremental, recapture, or
  left behind by the cost model);
- :mod:`.query`: running queries with the best valid sketch (or without one);
- :mod:`.scheduling`: maintenance policies, reports and the state budget;
- :mod:`.results`: the values these return.

The names are imported on first use (PEP 562): the parts load Spark and z3, which an Airflow
DAG that only names the provider's operators must not pay for when it is parsed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sketch_core.lazy import lazy_attributes

if TYPE_CHECKING:
    from sketch_core.costs.use import PLAIN_MARGIN
    from sketch_core.service.arguments import MAINTENANCE_STRATEGIES
    from sketch_core.service.capture import check_sketch_name
    from sketch_core.service.facade import SketchService
    from sketch_core.service.results import (
        GarbageReport,
        MaintenancePlan,
        MaintenanceRun,
        PolicyCheck,
        QueryResult,
        SketchedFrame,
        SketchVersion,
    )

__all__ = [
    "MAINTENANCE_STRATEGIES",
    "PLAIN_MARGIN",
    "GarbageReport",
    "MaintenancePlan",
    "MaintenanceRun",
    "PolicyCheck",
    "QueryResult",
    "SketchService",
    "SketchVersion",
    "SketchedFrame",
    "check_sketch_name",
]

_HOMES = {
    "MAINTENANCE_STRATEGIES": "sketch_core.service.arguments",
    "PLAIN_MARGIN": "sketch_core.costs.use",
    "GarbageReport": "sketch_core.service.results",
    "MaintenancePlan": "sketch_core.service.results",
    "MaintenanceRun": "sketch_core.service.results",
    "PolicyCheck": "sketch_core.service.results",
    "QueryResult": "sketch_core.service.results",
    "SketchService": "sketch_core.service.facade",
    "SketchVersion": "sketch_core.service.results",
    "SketchedFrame": "sketch_core.service.results",
    "check_sketch_name": "sketch_core.service.capture",
}


__getattr__ = lazy_attributes(__name__, _HOMES)
