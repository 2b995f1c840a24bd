"""The Spark session factory: local[2] by default, any master via SKETCH_SPARK_MASTER."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from typing import Any

from pyspark import SparkContext
from pyspark.sql import SparkSession

from sketch_core.config import JIT_SETTINGS, Settings
from sketch_core.errors import ConfigurationError
from sketch_core.spark.class_archive import archive_options
from sketch_core.spark.java import ensure_java
from sketch_core.spark.jvm_output import launch_relayed_gateway
from sketch_core.spark.lake import configure_lake

log = logging.getLogger(__name__)


_JIT_ALL_METHODS = "-XX:-DontCompileHugeMethods"
# SKETCH_JIT=quick: HotSpot's C1 compiler only. A short-lived process (an Airflow task that
# runs one report) spends most of its first query compiling Spark's code with C2 as well.
_JIT_QUICK = "-XX:TieredStopAtLevel=1"


def java_options(jit: str, archive: str = "") -> str:
    """The JVM options for the ``jit`` setting (Settings.jit) and the class archive's options
    (see :mod:`.class_archive`; the driver's JVM maps it). Raises ConfigurationError for a
    setting that is none of JIT_SETTINGS (one given in code or a connection's settings)."""
    if jit not in JIT_SETTINGS:
        raise ConfigurationError(
            f"jit={jit!r} is not one of {', '.join(JIT_SETTINGS)}",
            hint="set SKETCH_JIT (or the connection's settings.jit) to tiered or quick",
        )
    options = [_JIT_ALL_METHODS] if jit == "tiered" else [_JIT_ALL_METHODS, _JIT_QUICK]
    return " ".join([*options, archive] if archive else options)


def jvm_conf(settings: Settings) -> dict[str, str]:
    """The JVM options of the driver and the executors, as Spark settings: those of the ``jit``
    setting, and the driver's mapping of the class archive. The service's sessions set them; so
    does a job's spark-submit, whose driver JVM (client mode, on this machine) starts with them
    (a session built inside an already started JVM cannot change its options)."""
    return {
        # Sketch conditions and the capture's annotations compile to long generated methods;
        # by default HotSpot never JIT-compiles a method over 8,000 bytes of bytecode, and runs
        # it interpreted (3 to 8 times slower per row). Common Spark tuning.
        "spark.driver.extraJavaOptions": java_options(settings.jit, archive_options(settings)),
        "spark.executor.extraJavaOptions": java_options(settings.jit),
    }


CODEGEN_CACHE_KEY = "spark.sql.codegen.cache.maxEntries"
CODEGEN_CACHE_ENTRIES = 1_000
SPARK_CODEGEN_CACHE_ENTRIES = 100  # Spark's default, kept by a session that does not set it


def small_codegen_cache(configured: str | None) -> int | None:
    """How many plans' generated classes a session keeps (its ``spark.sql.codegen.cache.maxEntries``,
    ``configured``; unset is Spark's default) when fewer than the service's own sessions keep, else None."""
    try:
        entries = int(configured) if configured is not None else SPARK_CODEGEN_CACHE_ENTRIES
    except ValueError:  # not a number: Spark would have refused to start with it
        return None
    return entries if entries < CODEGEN_CACHE_ENTRIES else None


def warn_small_codegen_cache(spark: SparkSession) -> None:
    """Log a warning when a session given to the service (built before it, with Spark's default)
    keeps too few plans' classes. The setting is static: only whoever builds the session can set
    it, so the service can only say so."""
    entries = small_codegen_cache(spark.conf.get(CODEGEN_CACHE_KEY, None))
    if entries is not None:
        log.warning(
            "the Spark session keeps the generated classes of %d plans (%s); reports run plain and "
            "with sketches in one session evict each other's, and each run compiles them again "
            "(sketched reports up to 3x slower). Build the session with %s=%d: it cannot be changed "
            "once the session has started",
            entries,
            CODEGEN_CACHE_KEY,
            CODEGEN_CACHE_KEY,
            CODEGEN_CACHE_ENTRIES,
        )


EXCLUDED_RULES_KEY = "spark.sql.optimizer.excludedRules"
# Optimizer rules that give wrong answers on report shapes users write. Spark 4.1's
# PushProjectionThroughLimitAndOffset moves a select list holding a correlated scalar subquery
# below an ORDER BY ... LIMIT (a top-k derived table with, say, each customer's name looked up);
# the subquery then becomes a join between the sort and the limit, EliminateSorts drops the
# sort under it, and the limit keeps arbitrary rows. Without the rule the projection stays
# above the limit (planned as the same TakeOrderedAndProject where there is one).
WRONG_RESULT_RULES = ("org.apache.spark.sql.catalyst.optimizer.PushProjectionThroughLimitAndOffset",)


def excluded_rules(current: str | None) -> str:
    """``spark.sql.optimizer.excludedRules`` with :data:`WRONG_RESULT_RULES` added to the
    rules already excluded (``current``)."""
    rules = [r.strip() for r in (current or "").split(",") if r.strip()]
    return ",".join([*rules, *(r for r in WRONG_RESULT_RULES if r not in rules)])


def exclude_wrong_result_rules(spark: SparkSession) -> None:
    """Exclude :data:`WRONG_RESULT_RULES` from a running session's optimizer (a runtime
    setting: the session's own exclusions are kept)."""
    spark.conf.set(EXCLUDED_RULES_KEY, excluded_rules(spark.conf.get(EXCLUDED_RULES_KEY, None)))


def build_session(
    settings: Settings, app_name: str = "sketch-skipping", *, submitted: bool = False
) -> SparkSession:
    """A session configured for small, quick local jobs (few shuffle partitions, no UI).

    ``submitted``: the process was started by spark-submit, which chose the master, the driver's
    memory and the Python of the executors; only the session's own settings are added.
    """
    ensure_java()
    # Executors must run this interpreter, which has pyarrow and the project installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if settings.spark_master.startswith("local"):
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Under spark-submit, its --master and --name stand.
    builder = SparkSession.builder if submitted else SparkSession.builder.master(settings.spark_master)
    if not submitted:
        builder = builder.appName(app_name)
    builder = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
        .config("spark.default.parallelism", str(settings.spark_shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.parquet.filterPushdown", "true")
        # Parquet's dictionary filter reads and decodes a row group's dictionary pages for every
        # pushed column before reading it; for key columns (sketch attributes) that costs more
        # than it skips: sketched TPC-H SF1 Q3/Q10/Q18 ran 1.3-1.6x faster without it. Row-group
        # min/max filtering stays on.
        .config("spark.hadoop.parquet.filter.dictionary.enabled", "false")
        # Views list a snapshot's data files explicitly. Above this many paths Spark would run a
        # whole distributed job just to stat them (about 0.1 s per view at TPC-H SF1).
        .config("spark.sql.sources.parallelPartitionDiscovery.threshold", "1000000")
        # Spark keeps the classes it generates for 100 plans' operators; a few reports run plain
        # and sketched in one session need more (TPC-H Q3, Q10 and Q18 about 130), so each run
        # evicted the next one's classes: compiled again, then JIT-compiled again, which took
        # the JVM's compiler threads as long as the sketched run itself on two cores.
        .config(CODEGEN_CACHE_KEY, str(CODEGEN_CACHE_ENTRIES))
    )
    for key, value in jvm_conf(settings).items():
        if not (submitted and _submitted_with(key)):  # the submitter's (its connection's) stand
            builder = builder.config(key, value)
    if not submitted:
        builder = builder.config("spark.driver.memory", settings.spark_driver_memory)
    if not submitted and settings.spark_master.startswith("local"):
        builder = builder.config("spark.driver.host", "127.0.0.1").config(
            "spark.driver.bindAddress", "127.0.0.1"
        )
    if settings.metastore_url:
        # The project's tables as lake.<namespace>.<table>; under spark-submit the jars came
        # with --jars (the submitter adds them), since the driver's JVM is running already.
        builder = configure_lake(builder, settings, with_jars=not submitted)
    for key, value in settings.extra.items():
        builder = builder.config(key, value)
    if not submitted:  # under spark-submit, the JVM started this process, output and all
        launch_relayed_gateway({str(k): str(v) for k, v in builder._options.items()})
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def _submitted_with(key: str) -> bool:
    """Whether spark-submit, which started this process's JVM, was given the setting ``key``
    (its --conf values are the JVM's system properties)."""
    SparkContext._ensure_initialized()  # the gateway spark-submit started
    jvm: Any = SparkContext._jvm
    return jvm is not None and jvm.java.lang.System.getProperty(key) is not None


def java_version() -> str:
    ensure_java()
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
    return (out.stderr or out.stdout).splitlines()[0] if (out.stderr or out.stdout) else "unknown"
