"""Package attributes imported on first use (PEP 562), so that importing a light module of a
package (``sketch_core.errors``) does not load what its ``__init__`` re-exports (Spark, z3)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` that imports ``homes[name]`` (a module) the
    first time ``name`` is read, and keeps the value in the package from then on."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
