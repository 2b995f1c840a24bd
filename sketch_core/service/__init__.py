"""``SketchService``: the public entry point over one metastore and warehouse.

It is assembled from one class per job, each in its own module, each a subclass of the jobs it
calls on (so every method still sees one ``self``, and the public API is this one class):

- :mod:`.core`: construction, partitions, pinning, views, kept engines, versions and status;
- :mod:`.attributes`: which attribute to sketch each table on (safety, estimates);
- :mod:`.capture`: capturing a sketch on Spark and publishing it;
- :mod:`.lifecycle`: garbage collection, dropping sketches and tables;
- :mod:`.validation`: the delta-batch gate that maintenance passes through;
- :mod:`.maintenance`: bringing sketches to newer snapshots (incremental, recapture, or
  left behind by the cost model);
- :mod:`.scheduling`: maintenance policies, reports and the state budget;
- :mod:`.query`: running queries with the best valid sketch (or without one);
- :mod:`.results`: the values these return.
"""

from __future__ import annotations

from sketch_core.service.capture import check_sketch_name
from sketch_core.service.maintenance import MAINTENANCE_STRATEGIES
from sketch_core.service.query import PLAIN_MARGIN, Querying
from sketch_core.service.results import (
    GarbageReport,
    MaintenancePlan,
    MaintenanceRun,
    PolicyCheck,
    QueryResult,
    SketchVersion,
)
from sketch_core.service.scheduling import Scheduling

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
    "check_sketch_name",
]


class SketchService(Querying, Scheduling):
    """Tables, sketches (capture, use, maintenance, policies) and queries over one metastore
    and warehouse. Open one with :meth:`from_env` or :meth:`from_settings`."""
