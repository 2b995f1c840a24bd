"""``SketchService``: the one class the jobs are assembled into (see the package's docstring)."""

from __future__ import annotations

from sketch_core.service.query import Querying
from sketch_core.service.scheduling import Scheduling


class SketchService(Querying, Scheduling):
    """Tables, sketches (capture, use, maintenance, policies) and queries over one metastore
    and warehouse. Open one with :meth:`from_env` or :meth:`from_settings`."""
