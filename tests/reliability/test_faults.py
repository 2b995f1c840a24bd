"""Faults injected into real runs (``sketch_core.faults``): a capture or maintenance process
SIGKILLed at each step, a metastore connection cut mid-commit, a Spark job that fails. After
each: earlier versions intact, no version published twice, the next run succeeds and equals a
fresh capture, and what the dead run left behind is collected."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sketch_core import faults
from sketch_core.datasets import synthetic_table
from sketch_core.errors import SparkJobError, StateMissingError
from sketch_core.faults import InjectedFaultError
from sketch_core.maintenance import budget as budget_module
from sketch_core.service import SketchService, engines
from tests.reliability.conftest import sketch_with_state_then_load
from tests.service.test_maintain import HAVING, captured, fresh_fragments, maintained, sibling


def sketch_cli(env: dict[str, str], *args: str, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    """The `sketch` command in its own process (``fault``: SKETCH_FAULT for it)."""
    environment = {**os.environ, **env}
    environment.pop("SKETCH_FAULT", None)
    if fault is not None:
        environment["SKETCH_FAULT"] = fault
    return subprocess.run(
        [sys.executable, "-m", "sketch_core.cli", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )


def state_directories(svc: SketchService, name: str) -> set[Path]:
    """The sketch's state directories on disk."""
    root = svc.settings.warehouse / "_sketch_state" / name
    return {p for p in root.iterdir() if p.is_dir()} if root.is_dir() else set()


def settled_runs(svc: SketchService, name: str, wait_s: float = 10.0) -> list[dict[str, object]]:
    """The sketch's failed runs, once none is running any more (a killed process's session
    ends a moment after the process: the server notices the closed socket)."""
    deadline = time.monotonic() + wait_s
    while True:
        runs = svc.sketches.runs(name)
        if all(r["status"] != "running" for r in runs) or time.monotonic() > deadline:
            assert all(r["status"] != "running" for r in runs), runs
            return [r for r in runs if r["status"] == "failed"]
        time.sleep(0.1)


@pytest.fixture
def gated(spark_svc: SketchService, ns: str) -> tuple[SketchService, str, str, str]:
    return sketch_with_state_then_load(spark_svc, ns, "faulty", seed=81, load_rows=40)


@pytest.mark.parametrize(
    ("strategy", "point"),
    [
        ("incremental", "state-written"),
        ("incremental", "publish"),
        ("incremental", "published"),
        # A full run passes the same steps (its Spark job aside, which costs a JVM start per
        # case): killed once, mid-publish, where its running row must be settled as abandoned.
        ("full", "publish"),
    ],
)
def test_a_maintenance_killed_at_each_step_loses_nothing(
    gated: tuple[SketchService, str, str, str], env: dict[str, str], strategy: str, point: str
) -> None:
    svc, _, name, sql = gated
    before = maintained(svc, name)
    first = svc.sketches.version(name, version=1)
    killed = sketch_cli(env, "maintain", name, "--strategy", strategy, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr

    published = point == "published"  # the commit happened; only the caller never heard
    assert svc.sketches.versions(name) == ([1, 2] if published else [1])
    if strategy == "full":  # its row said "running": settled once its session is gone
        (abandoned,) = settled_runs(svc, name)
        assert abandoned["strategy"] == "full" and abandoned["error"].startswith("abandoned:")
    assert svc.sketches.version(name, version=1) == first, "version 1 untouched"
    if not published:
        assert maintained(svc, name) == before, "the last good version stands"

    (run,) = sibling(svc).maintain(name, strategy)  # the next run, in a new process in effect
    assert run.to_version == 2 and svc.sketches.versions(name) == [1, 2], "never published twice"
    assert run.strategy == ("none" if published else strategy)
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())

    # What the dead run left (state files of a version never published) goes once old; what
    # the kept versions read (directly or as the base of their layers) stays.
    sibling(svc, retain_seconds=0, retain_versions=5).collect_garbage([name])
    refs = [ref for ref in svc.sketches.state_refs()[name] if ref]
    live = {d.resolve() for ref in refs for d in svc.state_store.chain(ref)}
    assert live and {d.resolve() for d in state_directories(svc, name)} == live


@pytest.mark.parametrize("point", ["state-written", "publish", "published"])
def test_a_first_capture_killed_at_each_step_captures_again(
    spark_svc: SketchService, ns: str, env: dict[str, str], point: str
) -> None:
    svc = sibling(spark_svc)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(2000, 40, seed=83), sort_by=["a"])
    sql = HAVING.format(t=table)
    name = f"{ns}_first"
    args = ["capture", sql, "--name", name, "-a", f"{table}=a", "--fragments", "40"]
    killed = sketch_cli(env, *args, fault=point)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    published = point == "published"
    assert svc.sketches.versions(name) == ([1] if published else [])
    (abandoned,) = settled_runs(svc, name)
    assert abandoned["strategy"] == "capture" and abandoned["error"].startswith("abandoned:")
    if not published:
        assert svc.maintain_each([name]) == [], "defined, never published: nothing to maintain from"
    # The next capture, in a new process in effect (a sibling service: its own metastore
    # connections and caches; a second `sketch` process would only add a JVM start).
    done = sibling(svc).capture(sql, name=name, attributes={table: "a"}, fragments=40)
    assert done.version == 1 and svc.sketches.versions(name) == [1]
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


@pytest.mark.parametrize("point", ["publish", "publish-ack"])
def test_a_connection_cut_mid_commit_is_settled_by_reading_back(
    gated: tuple[SketchService, str, str, str], monkeypatch: pytest.MonkeyPatch, point: str
) -> None:
    """Cut before the commit: nothing was published, so it is published again. Cut after the
    commit, before its outcome was read: the version is there, and is returned, not repeated."""
    svc, _, name, sql = gated
    monkeypatch.setenv("SKETCH_FAULT", f"{point}:drop-connection")
    (run,) = svc.maintain(name, "incremental")
    monkeypatch.delenv("SKETCH_FAULT")
    assert run.to_version == 2 and svc.sketches.versions(name) == [1, 2]
    runs = [r for r in svc.sketches.runs(name) if r["strategy"] == "incremental"]
    assert [r["status"] for r in runs] == ["succeeded"], "one run recorded, with its version"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


def test_a_failed_spark_job_is_a_transient_error_and_a_retry_succeeds(
    gated: tuple[SketchService, str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _, name, sql = gated
    monkeypatch.setenv("SKETCH_FAULT", "spark-job:fail-job")
    with pytest.raises(SparkJobError) as info:
        svc.maintain(name, "full")
    assert info.value.transient and "fault injected at spark-job" in str(info.value)
    assert svc.sketches.versions(name) == [1]
    monkeypatch.delenv("SKETCH_FAULT")
    (run,) = svc.maintain(name, "full")  # the retry
    assert run.to_version == 2
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


def test_a_state_that_spark_fails_to_compute_is_a_typed_error_and_auto_recaptures(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sketch captured without state (the capture's default) gets its first state from a
    Spark job over its tables (above LOCAL_STATE_ROWS rows: set to 0 here, for small data).
    When that job fails (as when the state is more than the driver takes), ``incremental``
    raises StateMissingError naming the cause, nothing published; ``auto`` recaptures."""
    svc = sibling(spark_svc)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=83), sort_by=["a"])
    name, sql = captured(svc, table, "stateless")
    svc.tables.append(table, synthetic_table(40, 40, seed=84, key_start=3000))
    monkeypatch.setattr(engines, "LOCAL_STATE_ROWS", 0)
    monkeypatch.setattr(faults, "_fired", set())
    monkeypatch.setenv("SKETCH_FAULT", "state-job:fail-job")
    with pytest.raises(StateMissingError) as info:
        svc.maintain(name, "incremental")
    assert "the Spark job computing it failed: " in str(info.value)
    assert "fault injected at state-job" in str(info.value)
    assert svc.sketches.versions(name) == [1]
    assert [r["status"] for r in svc.sketches.runs(name)] == ["succeeded", "failed"]  # (the capture's)

    # Remembered (in the metastore, for every process): until STATE_RETRY_SECONDS have passed,
    # ``auto`` recaptures without running the state job again (at SF10 it took a minute), and
    # the status says why.
    (shown,) = sibling(svc).status(name)
    assert shown.state_mode is not None and shown.state_mode.mode == "none"
    assert "cannot be built (the Spark job computing it failed: " in shown.state_mode.reason
    assert "fault injected at state-job" in shown.state_mode.reason
    state_jobs: list[str] = []
    monkeypatch.setattr(faults, "_fired", set())  # armed again: the next state job fails too
    with faults.hook("state-job", lambda: state_jobs.append("tried")):
        (run,) = svc.maintain(name)
        assert (run.strategy, run.to_version) == ("full", 2), run
        assert state_jobs == [], "no state job while the failure is remembered"
        assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())

        # Once the retry time has passed, the state is tried again (and computed: no fault now).
        svc.tables.append(table, synthetic_table(40, 40, seed=85, key_start=4000))
        monkeypatch.setattr(budget_module, "STATE_RETRY_SECONDS", 0.0)
        monkeypatch.delenv("SKETCH_FAULT")
        (run,) = svc.maintain(name)
        assert state_jobs == ["tried"]
    assert (run.strategy, run.to_version) == ("incremental", 3), run
    assert sibling(svc).status(name)[0].state_mode is None, "the old failure is no longer shown"
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())


def test_a_capture_asked_for_a_state_spark_fails_to_compute_still_captures(
    spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``with_state``: the state job stands for the capture query over big tables; when it
    fails, the capture query runs and the version is published without state (before, the
    job's error failed the capture). A recapture is remembered the same way as maintenance."""
    svc = sibling(spark_svc)
    table = f"{ns}.facts"
    svc.tables.create(table, synthetic_table(3000, 40, seed=86), sort_by=["a"])
    name, sql = captured(svc, table, "first")  # the sketch exists; the next capture asks for state
    monkeypatch.setattr(engines, "LOCAL_STATE_ROWS", 0)
    monkeypatch.setattr(faults, "_fired", set())
    monkeypatch.setenv("SKETCH_FAULT", "state-job:fail-job")
    svc.tables.append(table, synthetic_table(40, 40, seed=87, key_start=3000))
    version = svc.capture(sql, name=name, attributes={table: "a"}, fragments=40, with_state=True)
    assert version.version == 2
    assert svc.sketches.version(name).state_ref is None  # type: ignore[union-attr]
    assert maintained(svc, name) == fresh_fragments(svc, sql, name, svc.latest_sequence())
    assert svc.context.budget.keeps_state(name) is False, "remembered: not tried at every capture"

    # A new sketch: the failure is remembered once the sketch exists, and the job is not run a
    # second time in the same capture (the fault fires once: a second job would succeed).
    state_jobs: list[str] = []
    monkeypatch.setattr(faults, "_fired", set())
    with faults.hook("state-job", lambda: state_jobs.append("ran")):
        new = svc.capture(sql, name=f"{name}_new", attributes={table: "a"}, fragments=40, with_state=True)
    assert state_jobs == ["ran"]
    assert svc.sketches.version(new.name).state_ref is None  # type: ignore[union-attr]
    assert svc.context.budget.keeps_state(new.name) is False


def test_a_run_that_raises_is_recorded_failed_and_one_under_way_is_not_settled(
    gated: tuple[SketchService, str, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    svc, _, name, _ = gated
    monkeypatch.setenv("SKETCH_FAULT", "publish:raise")
    with pytest.raises(InjectedFaultError):
        svc.maintain(name, "full")
    monkeypatch.delenv("SKETCH_FAULT")
    (failed,) = [r for r in svc.sketches.runs(name) if r["status"] == "failed"]
    assert failed["strategy"] == "full" and "injected" in failed["error"] and failed["finished_at"]
    # A run under way (its process holds the lock) stays running for every reader.
    run_id = svc.sketches.start_run(name, "full", 1)
    assert sibling(svc).sketches.runs(name)[-1]["status"] == "running"
    svc.sketches.finish_run(run_id, status="succeeded", to_version=None, delta_rows=0, seconds=0.1)
    assert svc.sketches.runs(name)[-1]["status"] == "succeeded"
