"""Airflow provider for provenance-sketch data skipping: hook, operators, trigger, sensor,
assets and a UI page over ``sketch_core``."""

from __future__ import annotations

__version__ = "0.1.0"
