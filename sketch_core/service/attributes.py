"""Attribute choice: which attribute each table of a query is sketched on (PBDS Sec. 6 safety
checks; CBS's estimates of each safe attribute's sketch size from a sample)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import pyarrow as pa

from sketch_core.algebra.ir import Relation, Scan, positive_scans, scans
from sketch_core.algebra.printer import to_sql
from sketch_core.algebra.query_text import query_text
from sketch_core.analysis.safety import (
    AttributeChoice,
    SafetyResult,
    Statistics,
    check_safety,
    choose_attributes,
    group_by_attributes,
    ordering_attributes,
)
from sketch_core.attribute_choice.bounds import top_k_bound
from sketch_core.attribute_choice.candidates import columns_read, table_candidates
from sketch_core.attribute_choice.estimation import DEFAULT_REPLICATES, Estimation
from sketch_core.attribute_choice.layout import (
    LayoutPick,
    files_read_on,
    pick_by_layout,
    reads_every_file,
)
from sketch_core.attribute_choice.local_plan import evaluate_plan
from sketch_core.attribute_choice.query import (
    AttributeEstimates,
    NotEstimable,
    SampledTable,
    estimate_candidates,
)
from sketch_core.attribute_choice.shape import aggregation_shape
from sketch_core.attribute_choice.store import StoredSample
from sketch_core.attribute_choice.strategies import (
    COST_BASED,
    TableCandidates,
    heuristic_fallbacks,
    preferences,
)
from sketch_core.errors import NoSafeAttributeError, QueryError, UnsafeAttributeError, UnsupportedQueryError
from sketch_core.partitions import RangePartition
from sketch_core.partitions.local import range_partitionable
from sketch_core.rewrites.push_selections import push_selections
from sketch_core.service.arguments import checked_fragments, checked_mapping, checked_snapshot, checked_sql
from sketch_core.service.context import ServiceContext
from sketch_core.spark.views import keep_view, register_view, table_schemas
from sketch_core.tables.deltas import read_matching
from sketch_core.tables.pinned import PinnedSnapshot

log = logging.getLogger(__name__)


def _attributes(pin: PinnedSnapshot) -> list[str]:
    """The table's columns a sketch can be on (see ``range_partitionable``)."""
    return [f.name for f in pin.schema if range_partitionable(f.type)]


def _spelled_attribute(pin: PinnedSnapshot, attribute: str) -> str:
    """A requested attribute as the table spells it (Spark resolves names in any case: a table
    Spark created has `UserId`); QueryError for a column it lacks or a range partition cannot cut."""
    names = pin.schema.names
    spelled = attribute if attribute in names else {c.lower(): c for c in names}.get(attribute.lower())
    if spelled is None:
        raise QueryError(f"{pin.table} has no column {attribute!r}", hint=f"columns: {names}")
    cuttable = _attributes(pin)
    if spelled not in cuttable:
        raise QueryError(
            f"{pin.table}.{spelled} is a {pin.schema.field(spelled).type} column, which a range "
            "partition cannot cut",
            hint=f"sketch a column of numbers, dates or strings: {cuttable}",
        )
    return spelled


def _no_candidates(sketched: Sequence[str], estimates: AttributeEstimates | None) -> str:
    """Why no table got a candidate attribute to check."""
    if estimates is None:
        without_estimates = " (the attribute strategy is the heuristic)"
    else:
        without_estimates = "" if estimates.reason is None else f" ({estimates.reason})"
    return (
        f"no candidate attribute: {', '.join(sorted(sketched))} has no sort key recorded, the "
        f"query neither groups nor orders its rows by a column of it a range partition can cut, "
        f"and the estimates that rank its other columns did not run{without_estimates}"
    )


def _unsafe_because(result: SafetyResult) -> str | None:
    return None if result.safe else result.reason or "unsafe"


class AttributeChooser:
    """Estimating and choosing the attributes a query's tables are sketched on."""

    def __init__(self, context: ServiceContext) -> None:
        self.context = context

    def estimate_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
        replicates: int = DEFAULT_REPLICATES,
    ) -> AttributeEstimates:
        """See :meth:`SketchService.estimate_attributes`."""
        plan, pins, statistics = self.pinned_plan(sql, params, snapshot)
        fragments = checked_fragments(fragments)  # type: ignore[assignment]
        return self.estimates(
            plan, pins, statistics, fragments or self.context.settings.fragments, replicates
        )

    def pinned_plan(
        self, sql: str, params: Mapping[str, Any] | None, snapshot: int | None
    ) -> tuple[Relation, dict[str, PinnedSnapshot], Statistics]:
        """The query's plan, its tables pinned at ``snapshot`` (default: the latest), and their
        column bounds (for safety checks)."""
        sql = self.context.views_inlined(checked_sql(sql))
        params = checked_mapping("params", params, "{'day': date(1995, 3, 15)}")
        ctx = self.context
        pins = ctx.pin_query(sql, ctx.sequence(checked_snapshot(snapshot)))
        parsed = query_text(sql).to_ir(table_schemas(pins), params)
        return parsed.plan, pins, {table: pin.column_bounds() for table, pin in pins.items()}

    def estimates(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        fragments: int,
        replicates: int = DEFAULT_REPLICATES,
        *,
        screen: bool = True,
    ) -> AttributeEstimates:
        """With ``screen``, only the attributes a safety check accepts are estimated; without,
        every attribute is (a capture checks its picks in order of preference anyway, and a
        check costs more than an estimate)."""
        started = time.perf_counter()

        def unsafe_because(table: str, attribute: str) -> str | None:
            if not screen:
                return None
            return _unsafe_because(check_safety(plan, {table: attribute}, statistics))

        tables, refused = table_candidates(
            plan, {t: _attributes(pin) for t, pin in pins.items()}, self.sort_keys(pins), unsafe_because
        )
        candidates = {table: list(c.all) for table, c in tables.items()}
        shape = aggregation_shape(plan)
        if isinstance(shape, str):
            return AttributeEstimates(candidates, refused, None, reason=shape, tables=tables)
        positive = {scan.table for scan in positive_scans(plan)}
        fact = max(sorted(positive), key=lambda t: pins[t].record_count)
        partition_of, fragment_count = self._stored_partitions(candidates, fragments)

        # Candidates that the query does not read and whose sketch reads every file are never
        # estimated (unless no other candidate of their table is left). Such a sketch skips
        # nothing; it could only win as the smallest where every sketch reads every file, on a
        # column the query does not filter, join or group on. Estimating them is what costs:
        # the sample would be drawn with their columns (decoding every column of the table was
        # most of a first capture's cost: at TPC-H SF10, 14 s to 20 s for `lineitem`'s 16
        # columns against 4 s to 5 s for Q3's 4), and a joined table's would be read whole from
        # every file (Q5's and Q7's `orders` and `customer` comments, clerks and addresses:
        # 2 GB decoded, most of a 3 s choice).
        spanning = {
            table: [a for a in attributes if reads_every_file(pins[table].files, a, fragment_count(table, a))]
            for table, attributes in candidates.items()
        }
        read: dict[str, set[str]] = {table: set() for table in candidates}
        for scan in scans(plan):
            read.setdefault(scan.table, set()).update(scan.source_columns)
        unread = {}
        for table, attributes in candidates.items():
            left_out = [a for a in spanning[table] if a not in read[table]]
            if left_out and len(left_out) < len(attributes):  # (none left: all of them are)
                unread[table] = left_out
        estimable = {t: [a for a in c if a not in unread.get(t, ())] for t, c in candidates.items()}
        grouped = group_by_attributes(plan).get(fact, [])
        stored = self.context.samples.sample(pins[fact], grouped, sorted(read[fact] | set(estimable[fact])))
        not_read = {
            f"{table}.{a}": "not estimated: the query does not read it, and its sketch reads every file "
            "however little it keeps (each file spans its range)"
            for table, attributes in unread.items()
            for a in attributes
        }

        def estimate(among: Mapping[str, list[str]]) -> Estimation:
            return estimate_candidates(
                lambda rows_plan: self.sample_rows(rows_plan, pins, fact, stored),
                shape,
                SampledTable(fact, stored.sample, stored.memo),
                among,
                partition_of,
                fragments,
                replicates=replicates,
            )

        # A candidate the query reads is estimated with the others, whether or not its sketch
        # reads every file: its column is read anyway, and holding it back cost a second
        # evaluation of the plan where none of the others skipped files (at SF10, 0.5 s of
        # Q5's 0.9 s choice).
        try:
            estimation = estimate(estimable)
            files_read = self._files_read(estimation, pins, fragment_count)
        except NotEstimable as why:
            return AttributeEstimates(candidates, refused, None, reason=str(why), tables=tables)
        estimation = replace(estimation, unestimated={**estimation.unestimated, **not_read})
        files_read.update(dict.fromkeys(not_read, 1.0))
        return AttributeEstimates(
            candidates,
            refused,
            estimation,
            sampled_table=fact,
            sample_drawn=stored.drawn,
            seconds=time.perf_counter() - started,
            tables=tables,
            files_read=files_read,
        )

    def _stored_partitions(
        self, tables: Iterable[str], fragments: int
    ) -> tuple[Callable[[str, str], RangePartition | None], Callable[[str, str], int]]:
        """The stored partition of a table on an attribute at ``fragments`` (None: none yet), and
        the fragments a sketch on it gets (the stored partition's, else ``fragments``)."""
        stored_ids = {table: self.context.sketches.partition_ids(table, fragments) for table in tables}

        def partition_of(table: str, attribute: str) -> RangePartition | None:
            found = stored_ids.get(table, {}).get(attribute)
            return None if found is None else self.context.partitions.get(found)[1]

        def fragment_count(table: str, attribute: str) -> int:
            stored_partition = partition_of(table, attribute)
            return stored_partition.fragment_count if stored_partition is not None else fragments

        return partition_of, fragment_count

    def _by_layout(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        fragments: int,
        sketched: Sequence[str],
        strategy: str,
    ) -> tuple[dict[str, list[str]], AttributeEstimates, AttributeChoice] | None:
        """The cost-based choice without a sample, where the tables' files settle it: each
        table's candidate on which its files hold disjoint ranges reads the fewest files
        (:func:`~sketch_core.attribute_choice.layout.pick_by_layout`), for a top-k report whose
        plan bounds its sketches (:mod:`~sketch_core.attribute_choice.bounds`). None where some
        table's choice needs the estimates (or a pick is unsafe): drawing the sample is most of
        a first capture's cost of choosing (at TPC-H SF10, 4 s of Q3's 11 s)."""
        bound = top_k_bound(plan)
        if bound is None:
            return None
        tables, _ = table_candidates(
            plan, {t: _attributes(pin) for t, pin in pins.items()}, self.sort_keys(pins), lambda t, a: None
        )
        _, fragment_count = self._stored_partitions(sketched, fragments)
        kind = strategy.removeprefix("cost-")
        picks: dict[str, LayoutPick] = {}
        for table in sketched:
            if table not in tables:
                return None
            found = pick_by_layout(
                pins[table].files,
                tables[table].pool(kind),
                tables[table].key,
                partial(fragment_count, table),
                partial(bound.fragments_at_most, table),
            )
            if isinstance(found, str):
                log.info("%s: the attribute is left to the estimates: %s", table, found)
                return None
            picks[table] = found
        candidates = {table: [pick.attribute] for table, pick in picks.items()}
        choice = choose_attributes(plan, candidates, statistics)
        if len(choice.chosen) < len(picks):
            return None
        log.info(
            "attributes chosen by the tables' layout, without a sample: %s",
            ", ".join(f"{t}.{p.attribute}" for t, p in picks.items()),
        )
        estimates = AttributeEstimates(
            {table: list(tables[table].pool(kind)) for table in picks},
            {},
            None,
            reason="chosen by the tables' layout: on each, the candidate its files hold disjoint "
            "ranges of reads the fewest files",
            tables=tables,
            files_read={
                f"{table}.{pick.attribute}": pick.files_read
                for table, pick in picks.items()
                if pick.files_read is not None
            },
        )
        return candidates, estimates, choice

    def _pick(
        self,
        plan: Relation,
        statistics: Statistics,
        strategy: str,
        pools: Mapping[str, TableCandidates],
        estimates: AttributeEstimates | None,
    ) -> tuple[dict[str, list[str]], AttributeEstimates | None, AttributeChoice]:
        """Each table's candidates in the strategy's order, the estimates with the tables
        chosen by the heuristic noted, and the safe picks made in that order."""
        expected = estimates.expected_selectivities() if estimates is not None else None
        files_read = estimates.files_read if estimates is not None else None
        candidates = preferences(strategy, pools, expected, files_read=files_read)
        if estimates is not None:
            fallbacks = heuristic_fallbacks(strategy, pools, expected)
            estimates = replace(estimates, fallbacks={t: estimates.fallback_reason(t) for t in fallbacks})
            for table, why in estimates.fallbacks.items():
                log.info("%s: attribute chosen by the heuristic, %s", table, why)
        return candidates, estimates, choose_attributes(plan, candidates, statistics)

    @staticmethod
    def _files_read(
        estimation: Estimation,
        pins: Mapping[str, PinnedSnapshot],
        fragment_count: Callable[[str, str], int],
    ) -> dict[str, float]:
        """``table.attribute`` -> the expected share of the table's files its sketch reads."""
        files_read = {}
        for key, e in estimation.candidates.items():
            table, attribute = key.rsplit(".", 1)
            files_read[key] = files_read_on(
                pins[table].files, attribute, e.fragment_share, fragment_count(table, attribute)
            )
        return files_read

    def sample_rows(
        self, plan: Relation, pins: Mapping[str, PinnedSnapshot], sampled: str, stored: StoredSample
    ) -> pa.Table:
        """``plan``'s rows with ``sampled``'s scans reading its sample: in-process when
        :mod:`~sketch_core.attribute_choice.local_plan` covers the plan (no Spark job: most of an estimate's
        time otherwise), else on Spark."""

        def read(scan: Scan, keys: Mapping[str, pa.Array] | None) -> pa.Table:
            if scan.table == sampled:
                return stored.sample.rows
            return read_matching(pins[scan.table], scan.source_columns, keys, self.context.tables.file_cache)

        try:
            return evaluate_plan(push_selections(plan), read, driving=sampled)
        except (UnsupportedQueryError, pa.ArrowException) as error:
            log.info("estimating on Spark: %s", error)
        except Exception as error:  # Spark evaluates the same plan exactly
            # The in-process path is a shortcut: a failure of its own (a case it misjudges)
            # must cost the user a Spark job, not the capture.
            log.warning("the in-process estimate failed (%r); estimating on Spark", error)
        # The sample's file, else (replaced by another process's wider draw since this one
        # loaded it) the rows this process holds; also when the file goes while Spark reads it.
        from_file = Path(stored.path).exists()
        try:
            return self._rows_on_spark(plan, pins, sampled, stored, from_file)
        except Exception:
            if not from_file or Path(stored.path).exists():
                raise
            log.info("the sample %s was replaced while Spark read it: estimating from memory", stored.path)
        return self._rows_on_spark(plan, pins, sampled, stored, from_file=False)

    def _rows_on_spark(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        sampled: str,
        stored: StoredSample,
        from_file: bool,
    ) -> pa.Table:
        spark = self.context.spark
        sample = spark.read.parquet(stored.path) if from_file else spark.createDataFrame(stored.sample.rows)
        view = keep_view(spark, f"__sample_{abs(hash((stored.path, from_file)))}", sample)
        source = {table: register_view(spark, pin) for table, pin in pins.items()} | {sampled: view}
        return spark.sql(to_sql(plan, source=lambda scan: source[scan.table])).toArrow()

    def choose_attributes(
        self,
        sql: str,
        params: Mapping[str, Any] | None = None,
        *,
        snapshot: int | None = None,
        fragments: int | None = None,
    ) -> tuple[dict[str, str], AttributeEstimates | None]:
        """See :meth:`SketchService.choose_attributes`."""
        plan, pins, statistics = self.pinned_plan(sql, params, snapshot)
        return self.choose(plan, pins, statistics, None, fragments or self.context.settings.fragments)

    def sort_keys(self, pins: Mapping[str, PinnedSnapshot]) -> dict[str, tuple[str, ...]]:
        keys = {}
        for table in pins:
            record = self.context.commit_log.get_table(table)
            keys[table] = record.sort_by if record else ()
        return keys

    def choose(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        requested: Mapping[str, str] | None,
        fragments: int,
    ) -> tuple[dict[str, str], AttributeEstimates | None]:
        """The attribute of each sketched table: ``requested`` (checked to be safe), or as the
        ``attribute_strategy`` setting picks them (with the estimates it ranked them by)."""
        if requested:
            wanted = {table.lower(): attribute for table, attribute in requested.items()}
            for table, attribute in wanted.items():
                if table not in pins:
                    raise QueryError(
                        f"attributes names {table}, which the query does not read",
                        hint=f"name tables the query reads: {sorted(pins)}",
                    )
                wanted[table] = _spelled_attribute(pins[table], attribute)
            positive = {scan.table for scan in positive_scans(plan)}
            for table, attribute in wanted.items():
                if table not in positive:
                    raise UnsafeAttributeError(
                        table,
                        attribute,
                        "the query reads it only where a sketch could add rows the full data does "
                        "not have: on a padded side of an outer join, or under NOT IN / NOT EXISTS",
                    )
                alone = check_safety(plan, {table: attribute}, statistics)
                if not alone.safe:
                    raise UnsafeAttributeError(table, attribute, alone.reason or "unsafe")
            together = check_safety(plan, wanted, statistics)
            if not together.safe:
                raise UnsafeAttributeError(
                    ", ".join(wanted), ", ".join(wanted.values()), f"together: {together.reason}"
                )
            return wanted, None
        positive = {scan.table for scan in positive_scans(plan)}
        if not positive:
            raise NoSafeAttributeError(
                sorted(pins),
                "the query reads every table where a sketch could add rows it does not have on the "
                "full data: on a padded side of an outer join, or under NOT IN / NOT EXISTS",
            )
        # Largest tables first: they have the most to skip, so they get first pick.
        by_size = sorted(positive, key=lambda t: -pins[t].record_count)
        minimum = self.context.settings.min_files_to_sketch
        large = [table for table in by_size if len(pins[table].files) >= minimum]
        # Tables with fewer files are sketched only where the larger ones have no safe pick, or
        # there are none (a user trying the service on a sample, tables still filling up): the
        # capture a user asked for works, and its sketch is maintained, ready for when the tables
        # grow; until it skips something the use decision runs the query without it.
        tiers = [large, by_size] if large and len(large) < len(by_size) else [large or by_size]
        estimates: AttributeEstimates | None = None
        for sketched in tiers:
            if sketched is not large:
                log.info(
                    "%s: fewer than %d data files each; sketched all the same (%s)",
                    ", ".join(t for t in by_size if t not in large),
                    minimum,
                    "the larger tables have no safe attribute" if large else "no table has more",
                )
            candidates, estimates, choice = self._choose_among(
                plan, pins, statistics, fragments, sketched, estimates
            )
            if choice.chosen:
                break
        if not choice.chosen:
            reasons = "; ".join(f"{t}.{a}: {r}" for t, refused in choice.refused.items() for a, r in refused)
            raise NoSafeAttributeError(sorted(candidates), reasons or _no_candidates(sketched, estimates))
        if estimates is not None:
            estimates = replace(estimates, refused=choice.refused)
        return choice.chosen, estimates

    def _choose_among(
        self,
        plan: Relation,
        pins: Mapping[str, PinnedSnapshot],
        statistics: Statistics,
        fragments: int,
        sketched: Sequence[str],
        estimates: AttributeEstimates | None,
    ) -> tuple[dict[str, list[str]], AttributeEstimates | None, AttributeChoice]:
        """The picks among the ``sketched`` tables' candidates (``estimates``: made already for
        the query's tables, else made here unless the strategy is the heuristic)."""
        strategy = self.context.settings.attribute_strategy
        if strategy == "heuristic":
            pools = self._heuristic_pools(plan, pins, sketched)
        else:
            if estimates is None and strategy in COST_BASED:
                try:
                    by_layout = self._by_layout(plan, pins, statistics, fragments, sketched, strategy)
                except Exception as error:
                    # A shortcut: a failure of its own (a case it misjudges) must cost the user a
                    # sample, not the capture.
                    log.warning("choosing by the tables' layout failed (%r); estimating", error)
                    by_layout = None
                if by_layout is not None:
                    return by_layout
            if estimates is None:
                estimates = self.estimates(plan, pins, statistics, fragments, screen=False)
            pools = {t: estimates.tables[t] for t in sketched if t in estimates.tables}
        candidates, estimates, choice = self._pick(plan, statistics, strategy, pools, estimates)
        if not choice.chosen:
            # The last resort: the other columns the query reads (a join or correlation key is
            # what a query with no safe group-by, ordering or sort-key attribute may still be
            # sketched on), each table's after its preferred candidates.
            widened = {t: list(dict.fromkeys([*c, *pools[t].used])) for t, c in candidates.items()}
            if widened != candidates:
                candidates, choice = widened, choose_attributes(plan, widened, statistics)
        return candidates, estimates, choice

    def _heuristic_pools(
        self, plan: Relation, pins: Mapping[str, PinnedSnapshot], sketched: Sequence[str]
    ) -> dict[str, TableCandidates]:
        """The candidates the heuristic orders, without a safety screen (the pick checks them):
        the group-by and ordering attributes and the sort key; and the columns the query reads,
        for the last resort."""
        grouped, ordered = group_by_attributes(plan), ordering_attributes(plan)
        read = columns_read(plan)
        keys = self.sort_keys(pins)
        pools = {}
        for t in sketched:
            cuttable = _attributes(pins[t])

            def among(names: Sequence[str], cuttable: list[str] = cuttable) -> tuple[str, ...]:
                return tuple(a for a in names if a in cuttable)

            pools[t] = TableCandidates(
                (),
                among(read.get(t, [])),
                among(grouped.get(t, [])),
                among(keys[t][:1]),
                among(ordered.get(t, [])),
            )
        return pools

    def record_choice(
        self,
        name: str,
        estimates: AttributeEstimates,
        chosen: Mapping[str, str],
        found: Mapping[str, Any],
        partitions: Mapping[str, tuple[int, RangePartition]],
    ) -> None:
        """Keep the estimates beside the sketch, with the share of fragments the captured sketch
        keeps on each chosen attribute and the relative size error of its estimate (CBS Sec.
        4.4.1; fragments, not rows: the captured sketch tells those without a scan)."""
        by_table: dict[str, dict[str, Any]] = {}
        refused = {(t, a): why for t, unsafe in estimates.refused.items() for a, why in unsafe}
        found_estimates = estimates.estimation.candidates if estimates.estimation is not None else {}
        for key, e in found_estimates.items():
            table, attribute = key.rsplit(".", 1)
            by_table.setdefault(table, {})[attribute] = {
                "selectivity": e.selectivity,
                "low": e.low,
                "high": e.high,
                "fragment_share": e.fragment_share,
                "files_read": estimates.files_read.get(key),
            }
            if (table, attribute) in refused:  # estimated, then found unsafe when picked
                by_table[table][attribute]["unsafe"] = refused[table, attribute]
        if estimates.estimation is None:  # chosen by the layout: the files read its bound gives
            for key, share in estimates.files_read.items():
                table, attribute = key.rsplit(".", 1)
                by_table.setdefault(table, {})[attribute] = {"files_read": share}
        outcome: dict[str, Any] = {}
        for table, attribute in chosen.items():
            # Compared as shares of fragments: what the captured sketch tells without a scan.
            estimated = by_table.get(table, {}).get(attribute, {}).get("fragment_share")
            actual = len(found.get(table, ())) / max(1, partitions[table][1].fragment_count)
            rse = None if estimated is None or actual == 0 else abs(estimated - actual) / actual
            outcome[table] = {"attribute": attribute, "estimated": estimated, "actual": actual, "rse": rse}
            if table in estimates.fallbacks:
                outcome[table]["fallback"] = f"heuristic: {estimates.fallbacks[table]}"
        self.context.choices.record(name, self.context.settings.attribute_strategy, by_table, outcome)
