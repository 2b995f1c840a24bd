"""A maintenance policy (IQP's policy component, Sec. 1-2): conditions that trigger maintenance.

Each condition is optional; a policy has at least one:
- ``delta_rows``: the rows inserted or deleted in the sketch's tables since its version reach N;
- ``elapsed_seconds``: this long has passed since the version was published;
- ``before_reports``: one of these reports announced that it is about to run (due within
  ``report_lead_seconds``), after the version was published.
``combine`` is ``any`` (one condition suffices) or ``all``. Whatever the conditions, a sketch
with no pending commits is never maintained: there is nothing to bring it up to.

Two options use predictions (issue 6, IQP Sec. 2):
- ``forecast_reports``: each report in ``before_reports`` also counts as due when its *next*
  run, predicted from its past announcements, is less than the estimated maintenance time plus
  ``report_lead_seconds`` away, so the sketch is fresh before a report that would otherwise
  find it stale, with no announcement needed;
- ``defer_in_bursts``: while a burst of commits is still arriving on the sketch's tables, the
  policy holds off (unless a report is due): maintaining in the middle of a burst is redone
  moments later.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sketch_core.durations import format_duration
from sketch_core.errors import PolicyError

COMBINATIONS = ("any", "all")
_KEYS = (
    "delta_rows",
    "elapsed_seconds",
    "before_reports",
    "report_lead_seconds",
    "combine",
    "forecast_reports",
    "defer_in_bursts",
)
_MAX_REPORT_NAME = 200


# How long after it is due an announced report may still run: the policies naming it fire until
# it has run, or until this has passed (a report that failed or was never started).
REPORT_WINDOW_SECONDS = 3600.0


@dataclass(frozen=True)
class Policy:
    delta_rows: int | None = None
    elapsed_seconds: float | None = None
    before_reports: tuple[str, ...] = field(default_factory=tuple)
    report_lead_seconds: float = 0.0
    combine: str = "any"
    forecast_reports: bool = False
    defer_in_bursts: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.before_reports, str):  # a single name, not its characters
            object.__setattr__(self, "before_reports", (self.before_reports,))
        else:
            object.__setattr__(self, "before_reports", tuple(self.before_reports))
        if self.delta_rows is None and self.elapsed_seconds is None and not self.before_reports:
            raise PolicyError("it has no condition", self)
        if self.delta_rows is not None and (
            isinstance(self.delta_rows, bool) or not isinstance(self.delta_rows, int) or self.delta_rows < 1
        ):
            raise PolicyError(f"delta_rows must be an integer >= 1, got {self.delta_rows!r}", self)
        if self.elapsed_seconds is not None and not _positive_number(self.elapsed_seconds):
            raise PolicyError(f"elapsed_seconds must be a number > 0, got {self.elapsed_seconds!r}", self)
        if not _non_negative_number(self.report_lead_seconds):
            raise PolicyError(
                f"report_lead_seconds must be a number >= 0, got {self.report_lead_seconds!r}", self
            )
        for report in self.before_reports:
            if not isinstance(report, str) or not 0 < len(report) <= _MAX_REPORT_NAME:
                raise PolicyError(f"report names are 1 to 200 characters, got {report!r}", self)
        if self.combine not in COMBINATIONS:
            raise PolicyError(f"combine must be 'any' or 'all', got {self.combine!r}", self)
        for flag in ("forecast_reports", "defer_in_bursts"):
            if not isinstance(getattr(self, flag), bool):
                raise PolicyError(f"{flag} must be true or false, got {getattr(self, flag)!r}", self)
        if self.forecast_reports and not self.before_reports:
            raise PolicyError("forecast_reports needs before_reports: the reports to forecast", self)

    @classmethod
    def from_json(cls, spec: Mapping[str, Any]) -> Policy:
        """The policy a JSON object describes (as stored, or as a user wrote it)."""
        if not isinstance(spec, Mapping):
            raise PolicyError("expected an object with the policy's conditions", spec)
        unknown = sorted(set(spec) - set(_KEYS))
        if unknown:
            raise PolicyError(f"unknown keys {', '.join(unknown)} (known: {', '.join(_KEYS)})", dict(spec))
        reports = spec.get("before_reports") or ()
        return cls(
            delta_rows=spec.get("delta_rows"),
            elapsed_seconds=spec.get("elapsed_seconds"),
            before_reports=(reports,) if isinstance(reports, str) else tuple(reports),
            report_lead_seconds=spec.get("report_lead_seconds", 0.0),
            combine=spec.get("combine", "any"),
            forecast_reports=spec.get("forecast_reports", False),
            defer_in_bursts=spec.get("defer_in_bursts", False),
        )

    def to_json(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"combine": self.combine}
        if self.delta_rows is not None:
            spec["delta_rows"] = self.delta_rows
        if self.elapsed_seconds is not None:
            spec["elapsed_seconds"] = float(self.elapsed_seconds)
        if self.before_reports:
            spec["before_reports"] = list(self.before_reports)
            spec["report_lead_seconds"] = float(self.report_lead_seconds)
        if self.forecast_reports:
            spec["forecast_reports"] = True
        if self.defer_in_bursts:
            spec["defer_in_bursts"] = True
        return spec

    def describe(self) -> str:
        """One line for the status page and the CLI, e.g. ``any of: delta rows >= 1,000; 1h elapsed``."""
        parts = []
        if self.delta_rows is not None:
            parts.append(f"delta rows >= {self.delta_rows:,}")
        if self.elapsed_seconds is not None:
            parts.append(f"{format_duration(self.elapsed_seconds)} elapsed")
        for report in self.before_reports:
            lead = f" (lead {format_duration(self.report_lead_seconds)})" if self.report_lead_seconds else ""
            parts.append(f"before report {report!r}{lead}")
        described = parts[0] if len(parts) == 1 else f"{self.combine} of: " + "; ".join(parts)
        if self.forecast_reports:
            described += ", ahead of the reports' forecast runs"
        if self.defer_in_bursts:
            described += ", deferred during bursts"
        return described


def _positive_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value > 0


def _non_negative_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


# Maintain whenever there is anything to maintain: what a sketch without a policy of its own gets.
DEFAULT_POLICY = Policy(delta_rows=1)


def effective_policy(stored: Mapping[str, Any] | None) -> tuple[Policy, bool]:
    """The policy a sketch is checked with, from its stored JSON (None: it has none), and
    whether it is the sketch's own (False: ``DEFAULT_POLICY``)."""
    return (Policy.from_json(stored), True) if stored is not None else (DEFAULT_POLICY, False)
