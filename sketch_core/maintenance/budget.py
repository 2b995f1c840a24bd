"""The state memory budget applied to the service's sketches (IQP's DISS over operator state).

With ``Settings.state_budget_bytes`` set, each sketch's incremental state is kept in one of
three modes, chosen together for all sketches by :func:`sketch_core.costs.budget.allocate`:

- ``full``: every value; maintenance runs incrementally;
- ``top_m``: min/max and top-k keep their top ``state_top_m`` values (IMP 9.4.3): smaller, but
  a run whose deletes use the kept values up recaptures;
- ``none``: no state; maintenance recaptures (``auto`` chooses ``full``).

Each option's memory is measured on the sketch's stored state (:mod:`sketch_core.costs.footprint`;
the sizes are remembered, so a sketch without state can win it back) and its expected seconds
per hour come from the sketch's cost model and its tables' commit history. The choice is stored
with its reason (``sketch.state_modes``), shown by the status page and the CLI, and revisited by
the policy checks every ``state_revisit_seconds``. A state kept for another mode than the
current one is not restored: the next incremental run builds the state anew on Spark.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sketch_core.config import Settings
from sketch_core.costs.arrivals import load_rate
from sketch_core.costs.budget import (
    Allocation,
    SketchState,
    StateOption,
    allocate,
    exhaust_probability,
    state_options,
)
from sketch_core.costs.footprint import Footprint, state_footprint
from sketch_core.errors import SketchNotFoundError, StateMissingError
from sketch_core.maintenance.advisor import CostAdvisor
from sketch_core.maintenance.state_store import StateStore
from sketch_core.metastore.policies import PolicyRepository
from sketch_core.metastore.sketches import SketchRepository, VersionRecord
from sketch_core.metastore.state_modes import StateMode, StateModeRepository

log = logging.getLogger(__name__)

# How long the state modes read from the metastore are reused (another process may allocate).
MODES_TTL_SECONDS = 30.0
# A sketch whose operator state cannot be built (Spark failed to compute it, as when it is more
# than the driver takes, or it would hold too many rows in-process: TPC-H Q18's at SF10) is
# maintained by recaptures for this long before its state is tried again: each try can cost the
# whole state job (a minute there) before the recapture. Remembered as the mode "none" with a
# reason that starts with NOT_BUILT, with or without a budget, so that every process (each
# Airflow task) knows it. So is a sketch whose incremental runs cost far more than recaptures
# (TOO_COSTLY: see IncrementalTooCostlyError).
STATE_RETRY_SECONDS = 24 * 3600.0
NOT_BUILT = "its operator state cannot be built"
TOO_COSTLY = "its incremental runs cost more than recaptures"


@dataclass(frozen=True)
class BudgetRun:
    allocation: Allocation
    changed: list[str]  # sketches whose mode changed
    unsized: list[str]  # sketches left as they were: no state has ever been measured


class StateBudget:
    def __init__(
        self,
        settings: Settings,
        sketches: SketchRepository,
        policies: PolicyRepository,
        modes: StateModeRepository,
        store: StateStore,
        advisor: CostAdvisor,
        tables_of: Callable[[str], Sequence[str]],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``tables_of(name)``: the tables the sketch's query reads."""
        self.settings = settings
        self.sketches = sketches
        self.policies = policies
        self.modes = modes
        self.store = store
        self.advisor = advisor
        self.tables_of = tables_of
        self.clock = clock
        self._modes: tuple[float, dict[str, StateMode]] | None = None
        self._footprints: dict[tuple[str, int], Footprint] = {}  # (state ref, m): refs never change

    # -- the current modes ---------------------------------------------------------------------
    def mode(self, name: str) -> StateMode | None:
        """The sketch's mode (None: never allocated, so its state is kept in full); read from
        the metastore at most every MODES_TTL_SECONDS (another process may have allocated).
        Without a budget only a state that could not be built counts (see
        :meth:`maintain_by_recaptures`), and only for ``STATE_RETRY_SECONDS``."""
        mode = self._stored_modes().get(name)
        if mode is not None and _is_failure_mark(mode):
            return mode if _failure_remembered(mode) else None
        return mode if self.settings.state_budget_bytes else None

    def _stored_modes(self) -> dict[str, StateMode]:
        if self._modes is None or self.clock() - self._modes[0] > MODES_TTL_SECONDS:
            self._modes = (self.clock(), self.modes.all())
        return self._modes[1]

    def state_built(self, name: str) -> None:
        """Forget that the sketch's state could not be built, now that it was (after the retry
        time): the status no longer shows the old failure."""
        mode = self._stored_modes().get(name)
        if mode is not None and _is_failure_mark(mode):
            self.modes.clear(name)
            self._modes = None

    def maintain_by_recaptures(self, name: str, cause: str, what: str = NOT_BUILT) -> None:
        """Maintain the sketch by recaptures for a while: its state cannot be built
        (``cause``; ``what``: NOT_BUILT), or its incremental runs cost far more than recaptures
        (TOO_COSTLY). Until ``STATE_RETRY_SECONDS`` have passed it keeps no state, and ``auto``
        recaptures it instead of trying again."""
        retry = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(time.time() + STATE_RETRY_SECONDS))
        shown = cause if len(cause) <= 300 else cause[:297] + "..."
        reason = f"{what} ({shown}); maintained by recaptures, the state tried again after {retry}"
        log.warning("%s: %s", name, reason)
        try:
            self.modes.set(name, "none", None, 0, None, reason)
        except SketchNotFoundError:  # its first capture: tried again at its first maintenance
            return
        self._modes = None

    def keep_top(self, name: str) -> int | None:
        """The m the sketch's min/max and top-k state keeps (None: every value)."""
        mode = self.mode(name)
        if mode is not None and mode.mode == "top_m":
            return mode.keep_top
        return self.settings.keep_top_m or None

    def keeps_state(self, name: str) -> bool:
        mode = self.mode(name)
        return mode is None or mode.mode != "none"

    def usable_state(self, name: str, record: VersionRecord) -> str | None:
        """The version's stored state when it was kept as the sketch's mode wants it now."""
        if not record.state_ref or not self.keeps_state(name):
            return None
        try:
            stored = self.store.keep_top(record.state_ref)
        except StateMissingError:
            return record.state_ref  # restoring reports it, with the reason
        return record.state_ref if stored == self.keep_top(name) else None

    # -- allocation ----------------------------------------------------------------------------
    def due(self, names: Sequence[str]) -> bool:
        """Whether the allocation should be revisited now: one of ``names`` has state but no
        mode yet (new sketches enter the budget at once), or the newest choice is older than
        ``state_revisit_seconds`` (the workload may have moved)."""
        if not self.settings.state_budget_bytes:
            return False
        known = self.modes.all()
        if not known or time.time() - max(m.decided_at.timestamp() for m in known.values()) >= (
            self.settings.state_revisit_seconds
        ):
            return True
        for name in names:
            if name not in known:
                record = self.sketches.version(name)
                if record is not None and record.state_ref:
                    return True
        return False

    def allocate(self, names: Sequence[str] | None = None) -> BudgetRun | None:
        """Choose every sketch's mode within the budget, and store the choices (None: no
        budget). ``names``: the sketches that share the budget (default: all of them)."""
        budget = self.settings.state_budget_bytes
        if not budget:
            return None
        keep = self.settings.state_top_m
        known = self.modes.all()
        states: list[SketchState] = []
        footprints: dict[str, Footprint] = {}
        unsized: list[str] = []
        for name in names if names is not None else [d.name for d in self.sketches.definitions()]:
            if name in known and _failure_remembered(known[name]):
                continue  # no state to place until it is tried again
            record = self.sketches.version(name)
            footprint = self._footprint(record, keep) if record is not None else None
            if footprint is None and name in known:
                footprint = Footprint(known[name].full_bytes, known[name].top_m_bytes)
            if footprint is None:
                unsized.append(name)
                continue
            footprints[name] = footprint
            states.append(SketchState(name, self._options(name, footprint, keep)))
        allocation = allocate(states, budget)
        changed = []
        for name, mode in allocation.modes.items():
            footprint = footprints[name]
            previous = known.get(name)
            if previous is None or previous.mode != mode:
                changed.append(name)
            self.modes.set(
                name, mode, keep, footprint.full_bytes, footprint.top_m_bytes, allocation.reasons[name]
            )
            log.info("state of %s: %s", name, allocation.reasons[name])
        self._modes = None
        return BudgetRun(allocation, changed, unsized)

    def _footprint(self, record: VersionRecord, keep: int) -> Footprint | None:
        if not record.state_ref:
            return None
        key = (record.state_ref, keep)
        if key not in self._footprints:
            try:
                layers = self.store.read(record.state_ref)
            except StateMissingError as exc:
                log.warning("cannot size the state of %s: %s", record.name, exc)
                return None
            self._footprints[key] = state_footprint((t for layer in layers for t in layer.values()), keep)
        return self._footprints[key]

    def _options(self, name: str, footprint: Footprint, keep: int) -> list[StateOption]:
        """The sketch's three modes with their bytes and expected maintenance seconds per hour."""
        tables = list(self.tables_of(name))
        loads, rows = load_rate(self.policies.commit_history(tables).values())
        table_rows = self.policies.table_rows(tables)
        exhaust = exhaust_probability(footprint.ordered_groups, table_rows, rows, keep)
        return state_options(
            self.advisor.model(name),
            table_rows,
            rows,
            loads,
            footprint.full_bytes,
            footprint.top_m_bytes,
            exhaust,
        )


def _failure_remembered(mode: StateMode) -> bool:
    """Whether ``mode`` remembers a state that could not be built, within its retry time."""
    age = time.time() - mode.decided_at.timestamp()
    return _is_failure_mark(mode) and age < STATE_RETRY_SECONDS


def _is_failure_mark(mode: StateMode) -> bool:
    """Whether ``mode`` was stored by :meth:`StateBudget.maintain_by_recaptures` (not by the budget)."""
    return mode.reason.startswith((NOT_BUILT, TOO_COSTLY))
