"""The Spark driver JVM's own output, through Python logging at the level each line deserves.

PySpark starts the driver JVM with this process's stdout and stderr, so the JVM's start-up notes
("Using incubator modules", "Setting default log level", the native-Hadoop warning) and log4j's
console lines land on stderr; a scheduler that files a task's stderr as errors (Airflow does)
then shows every Spark start as a run of errors. Started here instead, with pipes, each line goes
to the ``sketch_core.spark.jvm`` logger: log4j's lines at their own level (ERROR, WARN, INFO),
a Java stack trace at the level of the line it follows, the start-up notes at INFO.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections import deque
from typing import IO

from pyspark import SparkConf, SparkContext
from pyspark.java_gateway import launch_gateway

from sketch_core.errors import InfrastructureError

JVM_LOG = logging.getLogger("sketch_core.spark.jvm")

# log4j's console pattern in Spark's defaults: "26/11/27 14:58:21 WARN NativeCodeLoader: ..."
_LOG4J = re.compile(r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d (?P<level>FATAL|ERROR|WARN|INFO|DEBUG|TRACE) ")
_LEVELS = {
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": logging.DEBUG,
}
# Warnings every local start prints, none of which the user can or needs to act on.
_START_UP_NOTES = (
    "NativeCodeLoader: Unable to load native-hadoop library",
    "WARNING: Using incubator modules",
)


def _continues(line: str) -> bool:
    """A line of a stack trace or a multi-line message: it belongs to the line before."""
    return line.startswith(("\t", " ", "Caused by:", "Suppressed:")) or line.startswith("...")


def line_level(line: str, previous: int | None) -> int:
    """The level of one line of the JVM's output; ``previous``: the level of the line before."""
    if any(note in line for note in _START_UP_NOTES):
        return logging.INFO
    found = _LOG4J.match(line)
    if found is not None:
        return _LEVELS[found.group("level")]
    if previous is not None and _continues(line):
        return previous
    if re.match(r"^[\w.$]+(Exception|Error)(: |$)", line):  # a trace printed without a log line
        return logging.ERROR
    return logging.INFO


def _relay(stream: IO[bytes], recent: deque[str]) -> None:
    previous: int | None = None
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if not line:
            continue
        recent.append(line)
        previous = line_level(line, previous)
        JVM_LOG.log(previous, "%s", line)
    stream.close()


def launch_relayed_gateway(options: dict[str, str]) -> None:
    """Start the driver JVM for a session with these builder ``options``, its output relayed
    to logging; a no-op when this process has a JVM already (a session started before, or
    this process was started by spark-submit). The session built next uses this JVM."""
    if SparkContext._gateway is not None or "PYSPARK_GATEWAY_PORT" in os.environ:
        return
    conf = SparkConf(loadDefaults=False)
    for key, value in options.items():
        conf.set(key, value)
    # One pipe for both streams, read from before the JVM starts: what a JVM that fails to
    # start says is relayed too, and quoted in the error.
    read_end, write_end = os.pipe()
    recent: deque[str] = deque(maxlen=20)
    reader = threading.Thread(
        target=_relay, args=(os.fdopen(read_end, "rb"), recent), name="spark-jvm-output", daemon=True
    )
    reader.start()
    try:
        gateway = launch_gateway(conf, popen_kwargs={"stdout": write_end, "stderr": write_end})  # type: ignore[no-untyped-call]
    except Exception as exc:
        os.close(write_end)
        reader.join(timeout=5)
        said = "\n".join(recent)
        raise InfrastructureError(
            f"the Spark driver did not start: {exc}" + (f"; it said:\n{said}" if said else ""),
            hint="check JAVA_HOME and the Spark settings (spark_conf, driver memory)",
        ) from exc
    os.close(write_end)  # the JVM holds its own copy; the pipe ends when the JVM does
    SparkContext._ensure_initialized(gateway=gateway)
