"""Settings read from the environment (``SKETCH_*`` variables), with sane defaults."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TypeVar

from sketch_core.errors import ConfigurationError

T = TypeVar("T")

DEFAULT_SPARK_MASTER = "local[2]"
# Arrow in-memory bytes per data file (PyIceberg's unit). 8 MiB gives ~1-3 MiB Parquet files:
# several files per table already at TPC-H SF0.1, which file-level skipping needs.
DEFAULT_TARGET_FILE_BYTES = 8 * 1024 * 1024
# Small row groups let Parquet skip inside a file as well.
DEFAULT_ROW_GROUP_ROWS = 32_768
# Fragments per sketch partition; `make bench` compares 100, 1,000 and 10,000 (PBDS's range).
# 10,000 skips the most (SF1: Q3 6.0x, Q18 5.1x against 5.8x and 4.2x at 1,000) and its median
# capture overhead stays under 1.5x (1.24x), so it is the default (see the README's benchmarks).
DEFAULT_FRAGMENTS = 10_000
# OR'ed range conditions a sketched scan gets for Parquet pushdown. Spark evaluates every OR
# branch per row; a longer sketch gets coarsened ranges plus an exact binary search over its
# bounds (RangePartition.predicate). 4 measured best on TPC-H SF1 Q3/Q10/Q18 among 1 to 64.
# File pruning always uses the exact ranges.
DEFAULT_MAX_INTERVALS = 4
MIB = 1024 * 1024


def default_file_cache_mb() -> int:
    """1/16 of the machine's memory, between 512 MiB and 2 GiB. At TPC-H SF10 the attribute
    choice for Q10 reads 511 MiB of decoded `orders` and `customer` columns, every choice:
    in 512 MiB the least recently used were dropped just before they were read again, and each
    choice decoded them all anew (a 1.0 s choice, 0.3 s with the columns kept)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not a POSIX system that tells
        return 512
    return max(512, min(2048, memory // 16 // MIB))


SELF_TUNING_MODES = ("off", "eager", "adaptive")
ARROW_MEMORY_POOLS = ("system", "jemalloc", "mimalloc", "default")
MAINTAIN_ON_QUERY = ("off", "incremental", "full", "auto", "cost")
# When a query uses a valid sketch: "cost" when it is expected to make the query faster (from
# the files it skips until timed, then from the recorded runs), "always" whenever one is valid.
SKETCH_USE = ("cost", "always")
JIT_SETTINGS = ("tiered", "quick")
DEFAULT_JIT = "tiered"
# sketch_core.attribute_choice.strategies describes them.
ATTRIBUTE_STRATEGIES = (
    "heuristic",
    "random-all",
    "random-used",
    "random-group-by",
    "random-key",
    "cost-all",
    "cost-group-by",
)
DEFAULT_ATTRIBUTE_STRATEGY = "cost-all"


def default_home() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "sketch-skipping"


def sketch_home() -> Path:
    """``$SKETCH_HOME``, else :func:`default_home`."""
    return Path(os.environ.get("SKETCH_HOME") or default_home()).expanduser()


def _parsed_env(name: str, parse: Callable[[str], T], kind: str) -> T | None:
    """``name``'s value parsed, or None when it is unset or empty."""
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        return parse(raw)
    except ValueError as exc:
        raise ConfigurationError(f"{name}={raw!r} is not {kind}") from exc


def _int_env(name: str, default: int, minimum: int = 1) -> int:
    value = _parsed_env(name, int, "an integer")
    if value is None:
        return default
    if value < minimum:
        raise ConfigurationError(f"{name}={value} must be at least {minimum}")
    return value


def _share_env(name: str, default: float, *, allow_zero: bool = False) -> float:
    """A fraction in (0, 1] (or [0, 1] with ``allow_zero``)."""
    value = _parsed_env(name, float, "a number")
    if value is None:
        return default
    if not (0 <= value <= 1) or (value == 0 and not allow_zero):
        low = "[" if allow_zero else "("
        raise ConfigurationError(f"{name}={value} must be a share of the table, in {low}0, 1]")
    return value


def _float_env(name: str, default: float) -> float:
    """A number >= 0."""
    value = _parsed_env(name, float, "a number")
    if value is None:
        return default
    if not value >= 0:  # also refuses NaN
        raise ConfigurationError(f"{name}={value} must be a number >= 0")
    return value


def _choice_env(name: str, default: str, choices: tuple[str, ...]) -> str:
    raw = (os.environ.get(name) or default).strip().lower()
    if raw not in choices:
        raise ConfigurationError(f"{name}={raw!r} is not one of {', '.join(choices)}")
    return raw


def _catalog_env(name: str, default: str) -> str:
    """A catalog name Spark SQL can use unquoted: a letter or underscore, then word characters."""
    raw = (os.environ.get(name) or default).strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", raw):
        raise ConfigurationError(f"{name}={raw!r} is not a plain identifier (letters, digits, underscores)")
    return raw


@dataclass(frozen=True)
class Settings:
    """Everything the service needs to find its metastore, warehouse and Spark."""

    metastore_url: str | None
    warehouse: Path
    spark_master: str = DEFAULT_SPARK_MASTER
    spark_shuffle_partitions: int = 4
    spark_driver_memory: str = "4g"
    target_file_bytes: int = DEFAULT_TARGET_FILE_BYTES
    row_group_rows: int = DEFAULT_ROW_GROUP_ROWS
    # Arrow's allocator in a process running the service (see sketch_core/arrow/pool.py:
    # mimalloc, pyarrow's default, made the reads after a garbage collection ~20x slower).
    arrow_memory_pool: str = "system"
    commit_attempts: int = 8
    # The Iceberg catalog's name, for every engine: Spark SQL addresses tables as
    # <catalog>.<namespace>.<table>, and PyIceberg's SQL catalog and Iceberg's JDBC catalog
    # share the rows under this name (sketch_core.spark.lake).
    catalog_name: str = "lake"
    # Iceberg's Spark runtime and the JDBC driver (sketch_core.spark.jars); None: $SKETCH_JARS,
    # else $SKETCH_HOME/jars.
    jars_dir: Path | None = None
    fragments: int = DEFAULT_FRAGMENTS
    max_intervals: int = DEFAULT_MAX_INTERVALS
    # PBDS Sec. 8: "eager" captures when a query finds no usable sketch, "adaptive" once that
    # has happened `adaptive_after` times for the query's template, "off" never implicitly.
    self_tuning: str = "off"
    adaptive_after: int = 3
    # Tables with fewer data files than this are not sketched by default: nothing to skip.
    min_files_to_sketch: int = 2
    # strategy="auto" maintains incrementally up to this many changed rows; above, only where
    # the plan reduces a big delta set-at-a-time (see SketchService.maintain), else recaptures.
    incremental_max_delta_rows: int = 100_000
    # Above this many changed rows, aggregations that join or keep min/max get their deltas'
    # partial aggregates from Spark (IMP Sec. 8). High by default: on a 2-core machine local
    # Spark was slower than the in-process engine at every delta measured (up to 1M rows).
    spark_delta_rows: int = 10_000_000
    # Incremental engines kept in memory after a run, so the next run of the same sketch in this
    # process starts from them instead of reloading the stored state (0: always reload).
    engine_cache_entries: int = 8
    # Incremental maintenance reads only the delta rows that can pass the selections right
    # above the scans (IMP 9.4.2); off only to measure what that saves.
    delta_pushdown: bool = True
    # Join deltas are probed against a Bloom filter over the other side's join keys before
    # that side is read (IMP 9.4.1); off only to measure what that saves.
    join_bloom: bool = True
    # Min/max and top-k state keeps only the top m values per group (IMP 9.4.3); 0 keeps all.
    # Deletions that use up the kept values make maintenance recapture.
    keep_top_m: int = 0
    # A query that finds a sketch only at older snapshots maintains it to its own first with
    # this strategy ("incremental", "full" or "auto"), or runs without it ("off"); "cost" lets
    # the cost model choose among the three, given the queries expected before the next load.
    maintain_on_query: str = "off"
    # Whether a query applies a valid sketch: "cost" only when it is expected to run faster
    # with it (sketch_core.costs.use), "always" whenever one is valid.
    sketch_use: str = "cost"
    # The cost model's choices count this many runs of the query ahead as well as those before
    # the next load: a sketch left behind is brought up when the steady savings of keeping it
    # current pay back the catch-up within them (0: only the queries before the next load).
    cost_horizon_queries: int = 10
    # Garbage collection after maintenance: each sketch keeps its newest `retain_versions`
    # versions, and every version younger than `retain_seconds` (a query pinned to it may still
    # be running); state files only those versions read are deleted with them.
    retain_versions: int = 20
    retain_seconds: int = 3600
    # Collecting garbage also expires the tables' snapshots that neither a kept sketch version
    # nor a query pinned within `retain_seconds` can read (their metadata grows with every
    # commit, and every pin loads it), then deletes the table files no snapshot left reads
    # (copy-on-write deletes rewrite whole files); off keeps the tables' whole history.
    expire_table_snapshots: bool = True
    # A sketch version more than this many loads (commits to a table) behind stops holding
    # that table's history: its snapshots may then be expired like any others, and the sketch
    # is recaptured when it is next brought up. A sketch the cost model keeps skipping would
    # otherwise make every commit and pin of its tables load an ever longer history (0: no
    # limit, a kept version holds its tables' history for as long as it is kept).
    stale_history_loads: int = 100
    # Bytes of decoded data-file columns kept for the join reads of incremental maintenance and
    # of the attribute choice's estimates (default: see ``default_file_cache_mb``).
    file_cache_bytes: int = field(default_factory=lambda: default_file_cache_mb() * MIB)
    # A global budget for the sketches' operator state (0: none, every sketch keeps its state
    # in full). Within it each sketch keeps its state in full, cut to its top `state_top_m`
    # values, or none (maintenance recaptures), whichever keeps the expected maintenance time
    # lowest; revisited by the policy checks at most every `state_revisit_seconds`.
    state_budget_bytes: int = 0
    state_top_m: int = 10
    state_revisit_seconds: int = 300
    # Cost-based attribute choice (CBS): stratified samples at this rate (CBS Sec. 11 uses 5%
    # and 10%), drawn again once more than `sample_max_drift` of the table has changed.
    sample_rate: float = 0.05
    sample_max_drift: float = 0.1
    # How a capture without explicit attributes picks them (sketch_core.attribute_choice.strategies):
    # by default the smallest estimated sketch (the attribute-choice benchmark's best).
    attribute_strategy: str = DEFAULT_ATTRIBUTE_STRATEGY
    # Delta validation (sketch_core.validation): each commit a maintenance would use is checked
    # against its table's expectation suite first; a failing batch blocks the sketches it
    # feeds. Learned value domains are widened by `validation_slack` times their width each
    # side (sketch_core.validation.suite.Domain.allowed).
    validate_deltas: bool = True
    validation_slack: float = 10.0
    # A capture or maintenance run of a sketch that another run of it holds waits this long for
    # it (then finds the work done, or does it), and fails with SketchBusyError after.
    work_wait_seconds: int = 3600
    # The JVM's JIT compilers (sketch_core.spark.session.java_options): "tiered", HotSpot's
    # default (C1, then the optimising C2), or "quick" (C1 only: far less compiling, slower
    # peak code). See JIT_SETTINGS.
    jit: str = DEFAULT_JIT
    extra: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> Settings:
        home = sketch_home()
        warehouse = Path(os.environ.get("SKETCH_WAREHOUSE") or home / "warehouse").expanduser()
        return cls(
            metastore_url=os.environ.get("SKETCH_METASTORE_URL") or None,
            warehouse=warehouse.resolve(),
            spark_master=os.environ.get("SKETCH_SPARK_MASTER") or DEFAULT_SPARK_MASTER,
            spark_shuffle_partitions=_int_env("SKETCH_SPARK_SHUFFLE_PARTITIONS", 4),
            spark_driver_memory=os.environ.get("SKETCH_SPARK_DRIVER_MEMORY") or "4g",
            target_file_bytes=_int_env("SKETCH_TARGET_FILE_BYTES", DEFAULT_TARGET_FILE_BYTES, minimum=1024),
            row_group_rows=_int_env("SKETCH_ROW_GROUP_ROWS", DEFAULT_ROW_GROUP_ROWS, minimum=16),
            arrow_memory_pool=_choice_env("SKETCH_ARROW_MEMORY_POOL", "system", ARROW_MEMORY_POOLS),
            commit_attempts=_int_env("SKETCH_COMMIT_ATTEMPTS", 8),
            catalog_name=_catalog_env("SKETCH_CATALOG", "lake"),
            jars_dir=Path(os.environ.get("SKETCH_JARS") or home / "jars").expanduser().resolve(),
            fragments=_int_env("SKETCH_FRAGMENTS", DEFAULT_FRAGMENTS),
            max_intervals=_int_env("SKETCH_MAX_INTERVALS", DEFAULT_MAX_INTERVALS),
            self_tuning=_choice_env("SKETCH_SELF_TUNING", "off", SELF_TUNING_MODES),
            adaptive_after=_int_env("SKETCH_ADAPTIVE_AFTER", 3),
            min_files_to_sketch=_int_env("SKETCH_MIN_FILES_TO_SKETCH", 2),
            incremental_max_delta_rows=_int_env("SKETCH_INCREMENTAL_MAX_DELTA_ROWS", 100_000),
            spark_delta_rows=_int_env("SKETCH_SPARK_DELTA_ROWS", 10_000_000),
            engine_cache_entries=_int_env("SKETCH_ENGINE_CACHE_ENTRIES", 8, minimum=0),
            delta_pushdown=_choice_env("SKETCH_DELTA_PUSHDOWN", "on", ("on", "off")) == "on",
            join_bloom=_choice_env("SKETCH_JOIN_BLOOM", "on", ("on", "off")) == "on",
            keep_top_m=_int_env("SKETCH_KEEP_TOP_M", 0, minimum=0),
            maintain_on_query=_choice_env("SKETCH_MAINTAIN_ON_QUERY", "off", MAINTAIN_ON_QUERY),
            sketch_use=_choice_env("SKETCH_USE", "cost", SKETCH_USE),
            cost_horizon_queries=_int_env("SKETCH_COST_HORIZON_QUERIES", 10, minimum=0),
            retain_versions=_int_env("SKETCH_RETAIN_VERSIONS", 20),
            retain_seconds=_int_env("SKETCH_RETAIN_SECONDS", 3600, minimum=0),
            stale_history_loads=_int_env("SKETCH_STALE_HISTORY_LOADS", 100, minimum=0),
            expire_table_snapshots=_choice_env("SKETCH_EXPIRE_TABLE_SNAPSHOTS", "on", ("on", "off")) == "on",
            file_cache_bytes=_int_env("SKETCH_FILE_CACHE_MB", default_file_cache_mb(), minimum=0) * MIB,
            state_budget_bytes=_int_env("SKETCH_STATE_BUDGET_MB", 0, minimum=0) * MIB,
            state_top_m=_int_env("SKETCH_STATE_TOP_M", 10),
            state_revisit_seconds=_int_env("SKETCH_STATE_REVISIT_SECONDS", 300, minimum=0),
            sample_rate=_share_env("SKETCH_SAMPLE_RATE", 0.05),
            sample_max_drift=_share_env("SKETCH_SAMPLE_MAX_DRIFT", 0.1, allow_zero=True),
            attribute_strategy=_choice_env(
                "SKETCH_ATTRIBUTE_STRATEGY", DEFAULT_ATTRIBUTE_STRATEGY, ATTRIBUTE_STRATEGIES
            ),
            validate_deltas=_choice_env("SKETCH_VALIDATE_DELTAS", "on", ("on", "off")) == "on",
            validation_slack=_float_env("SKETCH_VALIDATION_SLACK", 10.0),
            work_wait_seconds=_int_env("SKETCH_WORK_WAIT_SECONDS", 3600, minimum=0),
            jit=_choice_env("SKETCH_JIT", DEFAULT_JIT, JIT_SETTINGS),
        )

    def with_metastore(self, url: str) -> Settings:
        return replace(self, metastore_url=url)

    def require_metastore_url(self) -> str:
        if not self.metastore_url:
            raise ConfigurationError(
                "SKETCH_METASTORE_URL is not set",
                hint="set it to a PostgreSQL SQLAlchemy URL (postgresql+psycopg://user@host/db), "
                "or use the `sketch` command, which starts a private server when it is unset",
            )
        return self.metastore_url
