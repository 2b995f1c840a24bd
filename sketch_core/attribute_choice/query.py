"""Sample-based selectivity estimates for a query's candidate attributes (CBS Sec. 8).

The query's largest table is replaced by its stratified sample (the other tables are read in
full: joined with a sample of the fact table they give a sample of the join, as CBS's join
templates need). The aggregation's input is evaluated over it (in-process with Arrow where
:mod:`~sketch_core.attribute_choice.local_plan` covers the plan, else as a Spark job), with per row: the
group-by values, the aggregates' arguments, the values of every candidate attribute of every
table, and which sampled row it came from. Everything after that is in-process
(:class:`~sketch_core.attribute_choice.estimation.SampleEstimator`): group estimates, the chain above the
aggregation (HAVING, top-k) on them, fragments per candidate, bootstrap.

A candidate's values map to fragments through its range partition: the stored one when there
is one (what a capture would use), otherwise equi-depth cuts from the sample itself for the
sampled table; for another table without a stored partition the distinct values are estimated
and turned into an expected number of equi-depth fragments they occupy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from sketch_core.algebra.ir import (
    Aggregate,
    Distinct,
    Join,
    Project,
    Relation,
    Scan,
    Select,
    Sort,
    TopK,
    Union,
    column,
    replace_children,
    scans,
)
from sketch_core.attribute_choice.estimation import (
    DEFAULT_SETTLE,
    AggregateInput,
    CandidateFragments,
    Estimation,
    ResultSelection,
    SampleEstimator,
)
from sketch_core.attribute_choice.sampling import SAMPLE_ROW, StratifiedSample, stratum_ids
from sketch_core.attribute_choice.shape import GROUP, AggregationShape, result_groups
from sketch_core.attribute_choice.strategies import TableCandidates
from sketch_core.errors import UnsupportedQueryError
from sketch_core.partitions import RangePartition
from sketch_core.partitions.range_partition import null_mask
from sketch_core.rewrites.distinct_aggregates import arguments_of, counted_value


@dataclass(frozen=True)
class SampledTable:
    """The table read through its sample; the sample's rows have :data:`SAMPLE_ROW` (the row's
    position in ``sample.rows``)."""

    table: str
    sample: StratifiedSample
    # Work done on the sample once for all queries (its rows' fragments per attribute).
    memo: MutableMapping[Any, Any] = field(default_factory=dict)


# A candidate's range partition, when one is known: (table, attribute) -> partition or None.
PartitionLookup = Callable[[str, str], RangePartition | None]
# The rows of a plan whose sampled table's scan reads the sample (in-process or on Spark).
RowsOf = Callable[[Relation], pa.Table]


def estimate_candidates(
    rows_of: RowsOf,
    shape: AggregationShape,
    sampled: SampledTable,
    candidates: Mapping[str, Sequence[str]],
    partition_of: PartitionLookup,
    fragments: int,
    *,
    replicates: int,
    seed: int = 0,
) -> Estimation:
    """Estimates keyed ``table.attribute`` for every candidate (see the module docstring)."""
    child, names, unreached = _widened(shape.aggregate.child, sampled.table, candidates)
    outputs: list[tuple[str, exp.Expr]] = [(name, e) for name, e in shape.aggregate.groups]
    arguments = {}
    for i, (name, call) in enumerate(shape.aggregate.aggregates):
        if call.arg is not None:
            arguments[name] = f"__argument_{i}"
            outputs.append((arguments[name], counted_value(list(arguments_of(call)))))
    outputs += [(f"__candidate_{i}", column(n)) for i, n in enumerate(names.values())]
    outputs.append((SAMPLE_ROW, column(names[(sampled.table, SAMPLE_ROW)])))
    rows = rows_of(Project(child, tuple(outputs)))
    # In the sample's order (a join or Spark returns them in any): group ids and the bootstrap's
    # draws then do not depend on how the rows were computed, and estimates repeat exactly.
    positions = rows.column(SAMPLE_ROW).to_numpy(zero_copy_only=False).astype(np.int64)
    order = np.argsort(positions, kind="stable")
    rows, positions = rows.take(pa.array(order, pa.int64())), positions[order]
    if len(positions) > 1 and bool(np.any(positions[1:] == positions[:-1])):
        # The estimators weigh each sampled row once: a join that matches one to several rows
        # (a dimension with duplicate keys, an outer join's matches) would count it twice.
        raise NotEstimable("a join matches some sampled rows to several rows")

    sample = sampled.sample
    group_names = [name for name, _ in shape.aggregate.groups]
    groups, group_count = stratum_ids(rows, group_names)
    keys = _first_per_group(rows.select(group_names), groups, group_count)
    aggregates = [
        AggregateInput(
            name,
            call.func,  # type: ignore[arg-type]
            None if call.arg is None else _as_numbers(rows.column(arguments[name]), call.func),
        )
        for name, call in shape.aggregate.aggregates
    ]

    keyed = keys.append_column(GROUP, pa.array(np.arange(group_count), pa.int64()))

    def choose(estimates: Mapping[str, np.ndarray], exists: np.ndarray) -> np.ndarray:
        table = keyed
        for name, values in estimates.items():
            table = table.append_column(name, pa.array(values, pa.float64()))
        table = table.filter(pa.array(exists))
        chosen = np.zeros(group_count, dtype=bool)
        try:
            chosen[result_groups(shape, table)] = True
        except (UnsupportedQueryError, pa.ArrowException) as error:
            raise NotEstimable(f"the HAVING or ORDER BY cannot be evaluated on estimates: {error}") from error
        return chosen

    estimator = SampleEstimator(
        sample.weights()[positions],
        sample.strata[positions],
        sample.stratum_samples,
        groups,
        group_count,
        aggregates,
        ResultSelection(choose=choose, top_k=any(isinstance(node, TopK) for node in shape.above)),
        population_scale=sample.population_scale,
    )
    grouped = {e.name for _, e in shape.aggregate.groups if isinstance(e, exp.Column)}
    per_candidate = {}
    for i, ((table, attribute), name) in enumerate(names.items()):
        if attribute == SAMPLE_ROW:
            continue
        values = rows.column(f"__candidate_{i}")
        per_candidate[f"{table}.{attribute}"] = _fragments(
            values,
            partition_of(table, attribute),
            fragments,
            determined_by_group=name in grouped,
            sampled=sampled if table == sampled.table else None,
            positions=positions,
            attribute=attribute,
        )
    estimation = estimator.estimate(per_candidate, replicates=replicates, seed=seed, settle=DEFAULT_SETTLE)
    unestimated = {f"{table}.{attribute}": why for (table, attribute), why in unreached.items()}
    return replace(estimation, unestimated=unestimated)


class NotEstimable(Exception):
    """The sampled table's rows cannot be followed up to the aggregation (see ``_widened``)."""


def _widened(
    plan: Relation, sampled_table: str, candidates: Mapping[str, Sequence[str]]
) -> tuple[Relation, dict[tuple[str, str], str], dict[tuple[str, str], str]]:
    """``plan`` with every scan also reading its table's candidate attributes (and the sampled
    table's scan the sample row), carried up through the projections of derived tables to the
    plan's output; the name each (table, attribute) is read under there (from the table's first
    scan that reaches it); and the candidates that cannot reach it, with the reason.

    A candidate's value per output row is only defined where each output row comes from one row
    of its table: through selections, projections, inner joins and orderings. Below an
    aggregation, a DISTINCT, a UNION or on a semi/anti join's right side it is not, and such a
    candidate is left to the fallback (:func:`~sketch_core.attribute_choice.strategies.preferences`).
    Raises :class:`NotEstimable` when the sampled table itself does not reach the output.
    """
    counter = iter(range(1_000_000))
    lost: dict[tuple[str, str], str] = {}

    def widen(scan: Scan) -> tuple[Scan, dict[tuple[str, str], str]]:
        wanted = list(candidates.get(scan.table, ()))
        if scan.table == sampled_table:
            wanted.append(SAMPLE_ROW)
        sources, outputs, types = list(scan.source_columns), list(scan.names), list(scan.types)
        read: dict[tuple[str, str], str] = {}
        for attribute in wanted:
            name = scan.name_of(attribute)
            if name is None:
                name = f"__read_{next(counter)}"
                sources.append(attribute)
                outputs.append(name)
                if types:
                    types.append("")
            read[(scan.table, attribute)] = name
        return Scan(scan.table, scan.alias, tuple(sources), tuple(outputs), tuple(types)), read

    def lose(node: Relation, why: str) -> None:
        for scan in scans(node):
            for attribute in (*candidates.get(scan.table, ()), SAMPLE_ROW):
                lost.setdefault((scan.table, attribute), why)

    def visit(node: Relation) -> tuple[Relation, dict[tuple[str, str], str]]:
        if isinstance(node, Scan):
            return widen(node)
        if isinstance(node, Select | TopK | Sort):
            child, read = visit(node.children[0])
            return replace_children(node, (child,)), read
        if isinstance(node, Project):
            child, read = visit(node.child)
            present = set(node.columns)
            carried = tuple((n, column(n)) for n in dict.fromkeys(read.values()) if n not in present)
            return Project(child, node.outputs + carried), read
        if isinstance(node, Join):
            if node.kind == "full":
                lose(node, "read on a padded side of a full outer join")
                return node, {}
            left, read = visit(node.left)
            if node.kind in ("semi", "anti", "left", "scalar"):
                lose(node.right, f"read only on the right side of a {node.kind} join")
                return replace_children(node, (left, node.right)), read
            right, right_read = visit(node.right)
            for key, name in right_read.items():
                read.setdefault(key, name)
            return replace_children(node, (left, right)), read
        what = {Aggregate: "an aggregation", Distinct: "a DISTINCT", Union: "a UNION"}.get(type(node))
        lose(node, f"read below {what or type(node).__name__} under the query's aggregation")
        return node, {}

    widened, names = visit(plan)
    if (sampled_table, SAMPLE_ROW) not in names:
        raise NotEstimable(
            f"the sampled table {sampled_table} is "
            + lost.get((sampled_table, SAMPLE_ROW), "not read by the aggregation")
        )
    unreached = {key: why for key, why in lost.items() if key not in names and key[1] != SAMPLE_ROW}
    return widened, names, unreached


def _first_per_group(keys: pa.Table, groups: np.ndarray, count: int) -> pa.Table:
    """Per group id (0..count-1), the key values of its first row."""
    order = np.argsort(groups, kind="stable")
    starts = np.flatnonzero(np.r_[True, groups[order][1:] != groups[order][:-1]]) if len(order) else order
    first = order[starts]
    return keys.take(pa.array(first, pa.int64()))


def _fragments(
    values: pa.ChunkedArray,
    partition: RangePartition | None,
    fragments: int,
    *,
    determined_by_group: bool,
    sampled: SampledTable | None,
    positions: np.ndarray,
    attribute: str,
) -> CandidateFragments:
    """The candidate's fragment per row. For the sampled table (``sampled``) the fragments of
    the whole sample (looked up by ``positions``), its table rows per fragment, and its
    partition, when none is stored, from the sample's quantiles."""
    if sampled is not None:
        whole = _sample_fragments(sampled, attribute, partition, fragments)
        if whole is not None:
            count, ids, rows = whole
            return CandidateFragments(ids[positions], count, determined_by_group, fragment_rows=rows)
    if partition is None:
        # A table read in full, without a stored partition: each distinct value stands in for
        # a fragment, and ``occupancy`` turns the estimated count of values into fragments.
        encoded = pc.dictionary_encode(values.combine_chunks(), null_encoding="encode")
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        return CandidateFragments(codes, fragments, determined_by_group, occupancy=True)
    return CandidateFragments(_fragment_ids(partition, values), partition.fragment_count, determined_by_group)


def _sample_fragments(
    sampled: SampledTable, attribute: str, partition: RangePartition | None, fragments: int
) -> tuple[int, np.ndarray, np.ndarray] | None:
    """For every row of the sample its fragment of ``attribute`` (the stored ``partition``, or
    cuts from the sample), the partition's fragment count, and the table rows per fragment the
    sample stands for; None when the sample holds no value of it. Kept in ``sampled.memo``: a
    sample serves many queries, and mapping its values to fragments is most of an estimate's
    own work."""
    key = (attribute, partition if partition is not None else fragments)
    if key not in sampled.memo:
        sample = sampled.sample
        column = sample.rows.column(attribute)
        partition = partition or sample_partition(_plain(column), fragments)
        if partition is None:
            sampled.memo[key] = None
        else:
            ids = _fragment_ids(partition, column)
            weights = sample.weights() * sample.population_scale
            rows = np.bincount(ids, weights=weights, minlength=partition.fragment_count + 1)
            sampled.memo[key] = (partition.fragment_count, ids, rows)
    found: tuple[int, np.ndarray, np.ndarray] | None = sampled.memo[key]
    return found


def _as_numbers(values: pa.ChunkedArray, func: str) -> np.ndarray:
    """An aggregate's argument as the doubles the estimators take, NULLs as NaN: numbers as
    they are; dates, times and timestamps as their integer encoding; strings and other values
    with an order as their rank among the sampled ones. Only the order of a MIN or MAX
    argument and whether a COUNT argument is NULL reach the estimates, and a HAVING or ORDER BY
    comparing such a value with a literal is not estimated (see ``choose``). A BI report's
    ``MAX(order_date)`` or ``COUNT(customer_name)`` beside its measures is common."""
    kind = values.type
    try:
        if pa.types.is_temporal(kind) and not pa.types.is_interval(kind):
            values = values.cast(pa.int32() if kind.bit_width == 32 else pa.int64())
        elif not (
            pa.types.is_integer(kind)
            or pa.types.is_floating(kind)
            or pa.types.is_decimal(kind)
            or pa.types.is_boolean(kind)
        ):
            ranks = pc.rank(values, sort_keys="ascending", tiebreaker="dense")
            values = pc.if_else(pc.is_null(values), pa.scalar(None, ranks.type), ranks)
        numbers: np.ndarray = values.cast(pa.float64()).to_numpy(zero_copy_only=False)
    except pa.ArrowException as error:
        raise NotEstimable(f"{func.upper()} over {kind} values: {error}") from error
    return numbers


def _fragment_ids(partition: RangePartition, values: pa.ChunkedArray) -> np.ndarray:
    if pa.types.is_string(values.type) or pa.types.is_large_string(values.type):
        return partition.fragments_of_strings(values)
    return partition.fragments_of(_plain(values))


def _plain(values: pa.ChunkedArray) -> np.ndarray:
    """Values as numpy the partitions can search fast: decimals as doubles (an estimate needs
    no exact cut), dates as datetime64[D], timestamps as datetime64[us], strings as objects."""
    if pa.types.is_decimal(values.type):
        values = values.cast(pa.float64())
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.timestamp("us"))
    array: np.ndarray = values.to_numpy(zero_copy_only=False)
    return array


def sample_partition(values: np.ndarray, fragments: int) -> RangePartition | None:
    """Equi-depth cuts from a sample's values (NULLs left out); None when there are none."""
    present = values[~null_mask(values)]
    if len(present) == 0:
        return None
    if present.dtype.kind == "O" and isinstance(present[0], str):
        # Sorted by Arrow, in Python's order (numpy's fixed-width strings drop trailing NULs).
        strings = pa.array(present.tolist(), pa.string())
        ordered = strings.take(pc.array_sort_indices(strings)).to_numpy(zero_copy_only=False)
    else:
        ordered = np.sort(present)
    positions = (np.arange(1, fragments) * len(ordered)) // fragments
    cuts = ordered[positions] if len(positions) else ordered[:0]
    return RangePartition.from_quantiles(
        "sample", "value", [c.item() if hasattr(c, "item") else c for c in cuts]
    )


@dataclass(frozen=True)
class AttributeEstimates:
    """Per table its safe candidate attributes with their estimates (when the query's shape
    allows estimating), and the unsafe ones with the reasons; plus how the estimate was made.

    For a capture, candidates are estimated before they are checked: ``candidates`` then holds
    every attribute, and ``refused`` those the capture found unsafe on its way to its pick."""

    candidates: dict[str, list[str]]
    refused: dict[str, list[tuple[str, str]]]
    estimation: Estimation | None
    reason: str | None = None  # why there are no estimates
    sampled_table: str | None = None
    sample_drawn: bool = False
    seconds: float = 0.0
    tables: dict[str, TableCandidates] = field(default_factory=dict)
    # table -> why a cost-based strategy chose its attribute by the heuristic instead
    fallbacks: dict[str, str] = field(default_factory=dict)
    # ``table.attribute`` -> expected share of the table's data files its sketch reads
    files_read: dict[str, float] = field(default_factory=dict)

    def fallback_reason(self, table: str) -> str:
        """Why none of ``table``'s candidates has an estimate."""
        if self.estimation is None:
            return f"no estimates: {self.reason}"
        prefix = f"{table}."
        reasons = {why for key, why in self.estimation.unestimated.items() if key.startswith(prefix)}
        return "; ".join(sorted(reasons)) or "none of its candidates could be estimated"

    def expected_selectivities(self) -> dict[str, float] | None:
        """``table.attribute`` -> expected selectivity; None without estimates."""
        if self.estimation is None:
            return None
        return {key: e.selectivity for key, e in self.estimation.candidates.items()}

    def ranked(self, table: str) -> list[tuple[str, float | None]]:
        """The table's safe candidates, smallest expected sketch first (unestimated: in order)."""
        if self.estimation is None:
            return [(a, None) for a in self.candidates.get(table, [])]
        found = self.estimation.candidates
        candidates = self.candidates.get(table, [])
        scored = [(a, found[f"{table}.{a}"].selectivity) for a in candidates if f"{table}.{a}" in found]
        left = [(a, None) for a in candidates if f"{table}.{a}" not in found]
        return [*sorted(scored, key=lambda item: item[1]), *left]
