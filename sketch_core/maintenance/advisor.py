"""The service's sketches' cost models, kept fresh enough and cheap enough to consult on every report.

A report that the cost model sends past its stale sketch should cost little more than the plain
query, but a fit reads six record sets, the expected query rate three more, and a decision row
is a write. So, per sketch, the advisor keeps:

- the fitted model, refitted after ``ttl`` seconds, or at once after a new run of an operation
  the model has fewer than ``REFIT_UNTIL_RUNS`` runs of (the first runs move a model most);
- the expected queries per load, for as long as the model;
- the choice made for a query at (version, commit sequence): the reports that follow at the same
  snapshots reuse it, and a choice to leave a version behind holds at later snapshots too
  (dropped with the model it came from, or after ``RECHECK_SKIP_AFTER`` reports: a sketch left
  behind is worth bringing up again while it can still be caught up incrementally, and at a
  report every few seconds the ttl alone let it fall past that);

and it records a decision only when its action differs from the last one recorded in the same
context, or ``RECORD_EVERY_SECONDS`` after it, so the status page's reason stays current without
a write per report.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from sketch_core.costs import Choice, CostModel
from sketch_core.costs.choose import seldom_timed, stale
from sketch_core.metastore.costs import CostRecords

log = logging.getLogger(__name__)

# How long a fitted model (and the expected query rate) is reused before it is fitted again.
# A refit and the choice made again after it are a dozen metastore reads on the report's path;
# at 30 s they came every other report of a workload that ran one every ~15 s (auto's stale
# sketches then cost ~25 ms per report more than running without a sketch). Runs of an
# operation a model knows little of refit it at once (``REFIT_UNTIL_RUNS``).
MODEL_TTL_SECONDS = 120.0
# A model is refitted after every new run of an operation it has fewer runs of than this.
REFIT_UNTIL_RUNS = 5
# An unchanged decision is recorded again after this long (its figures may have moved).
RECORD_EVERY_SECONDS = 60.0
# A choice to leave a sketch behind is made again (the model refitted) after this many reports.
RECHECK_SKIP_AFTER = 10


@dataclass
class _Fitted:
    at: float  # monotonic time of the fit
    model: CostModel
    template: str | None  # the sketch's query template (its plain runs refresh the model)
    expected_queries: float | None = None
    pinned: bool = False  # set by ``pin``: kept for the ttl whatever runs are recorded
    query_choices: dict[tuple[int, int], Choice] = field(default_factory=dict)
    skipped_version: int | None = None  # a stale version the model chose to leave behind
    skipped_reports: int = 0  # the reports that found it left behind since


class CostAdvisor:
    def __init__(
        self,
        records: CostRecords,
        share: Callable[[str], float | None],
        ttl: float = MODEL_TTL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``share(name)``: the fraction of the data the sketch's newest version keeps."""
        self.records = records
        self.share = share
        self.ttl = ttl
        self.clock = clock
        self._fitted: dict[str, _Fitted] = {}
        self._recorded: dict[tuple[str, str], tuple[str, float]] = {}  # (sketch, context) -> (action, at)

    # -- models --------------------------------------------------------------------------------
    def model(self, name: str, max_age: float | None = None) -> CostModel:
        """The sketch's model, fitted at most ``max_age`` seconds ago (None: the advisor's ttl;
        0: fitted now)."""
        return self._entry(name, self.ttl if max_age is None else max_age).model

    def _fresh(self, name: str, max_age: float | None = None) -> _Fitted | None:
        """The sketch's entry, if fitted at most ``max_age`` (default: the ttl) seconds ago."""
        entry = self._fitted.get(name)
        fresh = entry is not None and self.clock() - entry.at <= (self.ttl if max_age is None else max_age)
        return entry if fresh else None

    def _entry(self, name: str, max_age: float) -> _Fitted:
        entry = self._fresh(name, max_age)
        if entry is not None:
            return entry
        recorded = self.records.recorded_runs(name)
        model = CostModel.fitted(recorded.observations, share=self.share(name))
        entry = _Fitted(self.clock(), model, recorded.template)
        self._fitted[name] = entry
        return entry

    def pin(self, name: str, model: CostModel) -> None:
        """Decide for ``name`` with ``model`` until the ttl runs out (tests, calibration)."""
        self._fitted[name] = _Fitted(self.clock(), model, None, pinned=True)

    def pinned(self, name: str) -> bool:
        """Whether ``name``'s model was pinned (and still stands): decisions follow it alone."""
        entry = self._fresh(name)
        return entry is not None and entry.pinned

    def forget(self, name: str) -> None:
        self._fitted.pop(name, None)

    def observed(self, operation: str, name: str | None = None, template: str | None = None) -> None:
        """A run of ``operation`` was recorded, for sketch ``name`` or (a query without a
        sketch) for the sketches of ``template``: refit the models that still have few such runs,
        or few next to their most timed operation, or none for long (an alternative being timed
        again: its next choice should see this run, not wait for the ttl)."""
        for key, entry in list(self._fitted.items()):
            concerned = key == name or (template is not None and entry.template == template)
            model = entry.model
            young = (
                model.costs[operation].runs < REFIT_UNTIL_RUNS
                or seldom_timed(model, operation)
                or stale(model, operation)
            )
            if concerned and young and not entry.pinned:
                del self._fitted[key]

    def expected_queries(self, name: str) -> float:
        entry = self._entry(name, self.ttl)
        if entry.expected_queries is None:
            entry.expected_queries = self.records.expected_queries(name)
        return entry.expected_queries

    # -- the query path's choices --------------------------------------------------------------
    def query_choice(self, name: str, version: int, sequence: int) -> Choice | None:
        """The choice already made for a query at ``sequence`` finding version ``version``."""
        entry = self._fresh(name)
        return entry.query_choices.get((version, sequence)) if entry is not None else None

    def remember_query_choice(self, name: str, version: int, sequence: int, choice: Choice) -> None:
        entry = self._fitted.get(name)
        if entry is not None:
            entry.query_choices[(version, sequence)] = choice

    def skip_from(self, name: str, version: int) -> None:
        """The model chose to run queries without the sketch rather than bring ``version``
        up. While the model stands, that holds at later snapshots too: more delta only makes
        maintaining dearer, and skipping costs the same; so they skip without planning."""
        entry = self._fitted.get(name)
        if entry is not None:
            entry.skipped_version, entry.skipped_reports = version, 0

    def skipping(self, name: str, version: int) -> bool:
        """Whether a report finding ``version`` is to skip it without planning; counted, and
        from the ``RECHECK_SKIP_AFTER``-th such report on, the model is refitted (not pinned)."""
        entry = self._fresh(name)
        if entry is None or entry.skipped_version != version:
            return False
        entry.skipped_reports += 1
        if entry.skipped_reports > RECHECK_SKIP_AFTER and not entry.pinned:
            del self._fitted[name]
            return False
        return True

    # -- explanations --------------------------------------------------------------------------
    def record(self, name: str, context: str, choice: Choice) -> None:
        """Record the decision with its reason (see the module's note on when a repeat is
        written); a decision stands even when its record cannot be written."""
        now = self.clock()
        last = self._recorded.get((name, context))
        if last is not None and last[0] == choice.action and now - last[1] < RECORD_EVERY_SECONDS:
            log.debug("%s (%s): %s", name, context, choice.reason)
            return
        log.info("%s (%s): %s", name, context, choice.reason)
        try:
            self.records.record_decision(name, context, choice)
        except Exception as exc:  # the decision stands; only its explanation is lost
            log.warning("could not record the decision for %s: %s", name, exc)
            return
        self._recorded[(name, context)] = (choice.action, now)
