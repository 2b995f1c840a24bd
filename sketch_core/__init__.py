"""Provenance-based data skipping with incremental sketch maintenance for Spark."""

from sketch_core.config import Settings
from sketch_core.errors import SketchError
from sketch_core.service import QueryResult, SketchService, SketchVersion
from sketch_core.status import SketchStatus

__all__ = ["QueryResult", "Settings", "SketchError", "SketchService", "SketchStatus", "SketchVersion"]
__version__ = "0.1.0"
