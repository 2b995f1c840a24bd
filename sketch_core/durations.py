"""Durations as people read them, for reasons and status lines."""

from __future__ import annotations


def format_duration(seconds: float) -> str:
    """``90`` -> ``1m30s``, ``3600`` -> ``1h``: short, exact to the second."""
    whole = round(seconds)
    if whole < 1:
        return f"{seconds:.2g}s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, whole = divmod(whole, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)
