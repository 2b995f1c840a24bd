"""Provenance-based data skipping with incremental sketch maintenance for Spark."""

from sketch_core.config import Settings
from sketch_core.errors import SketchError
from sketch_core.service import QueryResult, SketchService

__all__ = ["QueryResult", "Settings", "SketchError", "SketchService"]
__version__ = "0.1.0"
