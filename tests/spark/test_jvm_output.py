"""The levels the Spark driver JVM's output lines are logged at (pure: no JVM)."""

from __future__ import annotations

import logging

from sketch_core.spark.jvm_output import line_level


def _levels(lines: list[str]) -> list[int]:
    levels, previous = [], None
    for line in lines:
        previous = line_level(line, previous)
        levels.append(previous)
    return levels


def test_start_up_notes_are_info_and_log4j_lines_keep_their_level() -> None:
    lines = [
        "WARNING: Using incubator modules: jdk.incubator.vector",
        "Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties",
        'Setting default log level to "WARN".',
        "26/11/27 14:58:21 WARN NativeCodeLoader: Unable to load native-hadoop library for your platform...",
        "26/11/27 14:59:37 WARN TaskSetManager: Lost task 0.0 in stage 3.0",
        "26/11/27 14:59:37 ERROR Executor: Exception in task 0.0 in stage 3.0 (TID 3)",
        "org.apache.spark.SparkRuntimeException: [USER_RAISED_EXCEPTION] boom",
        "\tat org.apache.spark.sql.errors.QueryExecutionErrors$.raiseError(QueryExecutionErrors.scala:3019)",
        "Caused by: java.lang.IllegalStateException: inner",
        "26/11/27 14:59:38 INFO SparkContext: Successfully stopped SparkContext",
    ]
    info, warning, error = logging.INFO, logging.WARNING, logging.ERROR
    assert _levels(lines) == [info, info, info, info, warning, error, error, error, error, info]


def test_a_trace_keeps_the_level_of_the_line_it_follows() -> None:
    warned = ["26/11/27 15:00:00 WARN BlockManager: Putting block failed", "\tat a.b.C.d(C.java:1)"]
    assert _levels(warned) == [logging.WARNING, logging.WARNING]
    assert line_level("\tat a.b.C.d(C.java:1)", None) == logging.INFO  # nothing before it
