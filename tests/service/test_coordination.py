"""Two runs of one sketch started together (two Airflow tasks, two DAGs, the page): the second
waits for the first before any Spark work, then finds the work done and does none."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from sketch_core import faults
from sketch_core.datasets import synthetic_table
from sketch_core.errors import SketchBusyError
from sketch_core.service import SketchService
from tests.service.test_maintain import HAVING, captured, sibling


def _together(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls in threads released at the same moment; their results, in order."""
    start = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = calls[i]()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(calls))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=600)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    return results


@pytest.mark.parametrize("strategy", ["full", "auto"])
def test_a_capture_and_a_maintenance_started_together_work_once_and_publish_one_version(
    spark_svc: SketchService, ns: str, strategy: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(4000, 40, seed=1), sort_by=["a"])
    name, sql = captured(svc, table, "together", with_state=True)
    svc.tables.append(table, synthetic_table(50, 40, seed=2, key_start=80_000))
    runs_before = len(svc.sketches.runs(name))
    other = sibling(svc)  # another process, in effect: its own locks, the same metastore

    spark_work: list[str] = []

    def working() -> None:  # the run that got the sketch holds it a while: the other must wait
        spark_work.append(threading.current_thread().name)
        time.sleep(1.5)

    with faults.hook("spark-job", working):
        recaptured, maintained = _together(
            [lambda: svc.capture(sql, name=name), lambda: other.maintain(name, strategy)]
        )
    (run,) = maintained
    versions = svc.sketches.versions(name)
    assert versions == [1, 2]  # exactly one version published
    assert recaptured.version == 2 and (run.to_version == 2)
    assert recaptured.sequence == svc.latest_sequence()
    new_runs = svc.sketches.runs(name)[runs_before:]
    assert [r["status"] for r in new_runs] == ["succeeded"], new_runs  # one of them did the work
    if strategy == "full":  # both would recapture: Spark ran once
        assert len(spark_work) == 1
    else:  # the maintenance goes incremental (no Spark); the capture, if second, finds it done
        assert len(spark_work) <= 1
    if run.strategy == "none":  # the maintenance waited, and found the capture's version
        assert new_runs[0]["strategy"] == "capture"


def test_a_run_that_waits_too_long_fails_transiently_naming_the_holder(
    spark_svc: SketchService, ns: str
) -> None:
    svc = spark_svc
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(2000, 20, seed=3), sort_by=["a"])
    name, sql = f"{ns}_busy", HAVING.format(t=table)
    svc.capture(sql, name=name, attributes={table: "a"}, fragments=20)
    svc.tables.append(table, synthetic_table(20, 20, seed=4, key_start=50_000))
    impatient = sibling(svc, work_wait_seconds=1)
    busy = pytest.raises(SketchBusyError, match=f"a maintenance run of {name} waited")
    with svc.coordinated(name, "a test's hold"), busy as raised:
        impatient.maintain(name, "full")
    assert raised.value.transient
    # Held no more: the same run goes through, and the holder's re-entry did not leak the lock.
    (run,) = impatient.maintain(name, "full")
    assert run.published and run.to_version == 2
