"""A class-data-sharing archive of the classes a Spark session loads (HotSpot's AppCDS).

A new JVM loads and verifies some 20,000 classes before a Spark session has run its first
report, and every Airflow task is a new JVM. An archive holds those classes parsed and verified,
mapped into memory at the next start instead: the session starts and runs its first report
sooner (docs/benchmarks.md, "A report in a fresh process").

The archive is built once (the bootstrap runs ``python -m sketch_core.spark.class_archive``,
as does ``sketch class-archive``):
a session of its own runs a short training workload (writes, reads, joins, aggregations, sorts,
the sketch's range predicates, a collection to Arrow) under ``-XX:ArchiveClassesAtExit``, and
the JVM writes what it loaded as it exits. Its name carries a digest of what it was built from
(the Java runtime, pyspark's jars, the jars Spark is given): after an upgrade no archive
matches and sessions start without one until it is built again. A session passes the archive
with ``-Xshare:auto``, so a JVM that cannot map it starts without it.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from sketch_core.config import Settings, sketch_home
from sketch_core.errors import ConfigurationError
from sketch_core.spark.jars import default_jars_dir
from sketch_core.spark.java import java_home

ARCHIVE_ENV = "SKETCH_CLASS_ARCHIVE"  # "off": sessions start without one
_DUMP_ENV = "_SKETCH_CLASS_ARCHIVE_DUMP"  # the training child's output file
_TRAIN_SECONDS = 1800  # about a minute on two cores; a child stuck past this is given up on


def _fingerprint(jars_dir: Path) -> str:
    """A digest of the JVM and the jars a session loads; any change gives another archive."""
    import pyspark

    parts = [sys.version.split()[0], pyspark.__version__]
    home = java_home()  # the JVM the sessions start, which the archive must be built by
    if home is not None:
        for file in (home / "release", home / "lib" / "modules", home / "lib" / "server" / "classes.jsa"):
            if file.exists():
                stat = file.stat()
                parts.append(f"{file}:{stat.st_size}:{int(stat.st_mtime)}")
    spark_jars = Path(pyspark.__file__).parent / "jars"
    for folder in (spark_jars, jars_dir):
        if folder.is_dir():
            parts += sorted(f"{j.name}:{j.stat().st_size}" for j in folder.glob("*.jar"))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def archive_path(settings: Settings) -> Path:
    """Where the archive for this JVM and these jars is kept (it may not exist yet)."""
    # The jars a session loads: those of settings made in code (no folder given) are the
    # default folder's, as for settings read from the environment.
    jars = settings.jars_dir or default_jars_dir()
    return sketch_home() / "jvm" / f"spark-classes-{_fingerprint(jars)}.jsa"


def archive_options(settings: Settings) -> str:
    """The JVM options that map the archive, or "" (none built for this setup, or turned off
    with ``SKETCH_CLASS_ARCHIVE=off``; the training session itself writes one instead)."""
    dump = os.environ.get(_DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump}"
    if (os.environ.get(ARCHIVE_ENV) or "on").strip().lower() == "off":
        return ""
    path = archive_path(settings)
    return f"-XX:SharedArchiveFile={path} -Xshare:auto" if path.is_file() else ""


def build_archive(settings: Settings | None = None, *, force: bool = False) -> str:
    """Build the archive for this setup (a training session in a child process) unless it
    exists (``force``: build it again); returns a line that names it and whether it was built.
    Raises ConfigurationError when it cannot be built."""
    settings = settings or Settings.from_env()
    path = archive_path(settings)
    if path.is_file() and not force:
        return f"class archive: {path} (built before)"
    began = time.monotonic()
    try:
        _build(path)
    except OSError as exc:  # the folder cannot be written, or the child cannot be started
        raise ConfigurationError(
            f"the class archive could not be written to {path.parent} ({exc})",
            hint="set SKETCH_HOME to a folder this user can write; sessions start without it",
        ) from exc
    return f"class archive: {path} ({path.stat().st_size // 2**20} MiB, {time.monotonic() - began:.0f} s)"


def _build(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    # Written beside the final name and renamed once the JVM has exited: a session never
    # maps a half-written archive, and two builds at once each finish their own file.
    handle, scratch = tempfile.mkstemp(prefix=path.stem + ".", suffix=".part", dir=path.parent)
    os.close(handle)
    os.unlink(scratch)  # the JVM creates it
    env = {**os.environ, _DUMP_ENV: scratch}
    try:
        done = subprocess.run(
            [sys.executable, "-m", "sketch_core.spark.class_archive", "--train"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=_TRAIN_SECONDS,
        )
        failure = None if done.returncode == 0 else f"exit {done.returncode}: {done.stderr[-1500:]}"
    except subprocess.TimeoutExpired:
        failure = f"the training session took over {_TRAIN_SECONDS} s"
    if failure is not None or not Path(scratch).is_file():
        Path(scratch).unlink(missing_ok=True)
        raise ConfigurationError(
            f"the class archive could not be built ({failure or 'the JVM wrote no archive'})",
            hint=f"sessions start without it; set {ARCHIVE_ENV}=off to stop looking for one",
        )
    os.replace(scratch, path)
    for stale in path.parent.glob("spark-classes-*.jsa"):  # built for a JVM or jars now gone
        if stale != path:
            stale.unlink(missing_ok=True)


def _train() -> None:
    """The training workload: what a session does for captures, maintenance and reports."""
    from sketch_core.spark.session import build_session

    settings = Settings.from_env()
    spark = build_session(settings, "sketch-class-archive")
    with tempfile.TemporaryDirectory() as scratch:
        facts = spark.range(200_000).selectExpr(
            "id AS key",
            "id % 997 AS customer",
            "CAST(id % 1000 AS DOUBLE) * 1.5 AS price",
            "DATE_ADD(DATE'1995-01-01', CAST(id % 2000 AS INT)) AS day",
            "CONCAT('flag', CAST(id % 3 AS STRING)) AS flag",
        )
        facts.write.parquet(f"{scratch}/facts")
        spark.range(997).selectExpr("id AS customer", "CONCAT('name', id) AS name").write.parquet(
            f"{scratch}/customers"
        )
        spark.read.parquet(f"{scratch}/facts").createOrReplaceTempView("facts")
        spark.read.parquet(f"{scratch}/customers").createOrReplaceTempView("customers")
        reports = (
            "SELECT c.name, SUM(f.price) AS revenue, COUNT(*) AS n FROM facts f JOIN customers c "
            "ON f.customer = c.customer WHERE f.day < DATE'1999-01-01' AND f.flag <> 'flag2' "
            "GROUP BY c.name HAVING SUM(f.price) > 10 ORDER BY revenue DESC LIMIT 10",
            "SELECT customer, day, price, RANK() OVER (PARTITION BY customer ORDER BY price DESC) AS r "
            "FROM facts WHERE (key BETWEEN 10 AND 5000 OR key BETWEEN 90000 AND 91000) AND price > 3",
            "SELECT flag, AVG(price), MIN(day), MAX(key) FROM facts WHERE key IN "
            "(SELECT key FROM facts WHERE customer < 5) GROUP BY flag ORDER BY flag",
        )
        for sql in reports:
            spark.sql(sql).toArrow()
            spark.sql(sql).collect()
    spark.stop()
    # The JVM writes the archive as it exits, which it does when its input closes: wait for it,
    # or the builder would find the file before it is complete.
    from pyspark import SparkContext

    gateway: Any = SparkContext._gateway
    process = getattr(gateway, "proc", None)
    if process is not None:
        gateway.shutdown()
        if process.stdin is not None:
            process.stdin.close()
        process.wait(timeout=600)


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if args == ["--train"]:
        _train()
        return
    print(build_archive(force="--force" in args))


if __name__ == "__main__":
    main()
