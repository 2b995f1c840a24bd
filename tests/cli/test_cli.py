"""The `sketch` command line against the real metastore and warehouse."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from sketch_core import cli
from sketch_core.cli import EXIT_TERMINAL, EXIT_TRANSIENT, app, parse_value
from sketch_core.datasets import synthetic_table
from sketch_core.localstack.postgres import free_loopback_port
from sketch_core.service import SketchService


def test_tables_verbs_round_trip(env: dict[str, str], ns: str, tmp_path: Path) -> None:
    runner = CliRunner()
    first, more = tmp_path / "first.parquet", tmp_path / "more.parquet"
    pq.write_table(synthetic_table(100, groups=5, seed=1), first)
    pq.write_table(synthetic_table(20, groups=5, seed=2, key_start=100), more)

    created = runner.invoke(app, ["tables", "create", f"{ns}.r", str(first), "--sort-by", "key"], env=env)
    assert created.exit_code == 0, created.output
    assert f"created {ns}.r at commit sequence" in created.output
    assert runner.invoke(app, ["tables", "append", f"{ns}.r", str(more)], env=env).exit_code == 0
    assert runner.invoke(app, ["tables", "delete", f"{ns}.r", "key < 10"], env=env).exit_code == 0

    commits = runner.invoke(app, ["tables", "commits", f"{ns}.r"], env=env, terminal_width=200)
    assert commits.exit_code == 0
    assert [w for w in ("create", "append", "delete") if w in commits.output] == [
        "create",
        "append",
        "delete",
    ]
    listed = runner.invoke(app, ["tables", "list"], env=env, terminal_width=200)
    assert f"{ns}.r" in listed.output and "110" in listed.output

    declined = runner.invoke(app, ["tables", "drop", f"{ns}.r"], env=env, input="n\n")
    assert declined.exit_code != 0 and "Aborted" in declined.output
    assert f"{ns}.r" in runner.invoke(app, ["tables", "list"], env=env, terminal_width=200).output
    dropped = runner.invoke(app, ["tables", "drop", f"{ns}.r", "--yes"], env=env)
    assert dropped.exit_code == 0 and f"dropped {ns}.r at commit sequence" in dropped.output
    assert f"{ns}.r" not in runner.invoke(app, ["tables", "list"], env=env, terminal_width=200).output
    again = runner.invoke(app, ["tables", "drop", f"{ns}.r", "--yes"], env=env)
    assert again.exit_code == EXIT_TERMINAL and "unknown table" in again.output


def test_errors_are_explained_with_exit_codes(env: dict[str, str], ns: str, tmp_path: Path) -> None:
    runner = CliRunner()
    missing = runner.invoke(app, ["tables", "delete", f"{ns}.nope", "key = 1"], env=env)
    assert missing.exit_code == EXIT_TERMINAL
    assert "unknown table" in missing.output and "hint" in missing.output

    down = {**env, "SKETCH_METASTORE_URL": f"postgresql://x@127.0.0.1:{free_loopback_port()}/x"}
    unreachable = runner.invoke(app, ["tables", "list"], env=down)
    assert unreachable.exit_code == EXIT_TRANSIENT
    assert "cannot reach the metastore" in unreachable.output


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("42", 42),
        ("-3.5", Decimal("-3.5")),
        ("1995-03-15", dt.date(1995, 3, 15)),
        ("1995-03-15T10:00:00", dt.datetime(1995, 3, 15, 10)),
        ("BUILDING", "BUILDING"),
        ("'42'", "42"),
    ],
)
def test_param_values_are_typed(raw: str, expected: object) -> None:
    value = parse_value(raw)
    assert value == expected and type(value) is type(expected)


@pytest.fixture
def wide_console(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tables print unwrapped, so the assertions can look for whole cells."""
    monkeypatch.setattr(cli.console, "width", 250)


@pytest.mark.usefixtures("wide_console")
def test_capture_query_and_status(env: dict[str, str], spark_svc: SketchService, ns: str) -> None:
    """capture -> status -> query with the sketch equals the query without it -> a load makes it stale."""
    runner = CliRunner()
    table = f"{ns}.events"
    spark_svc.tables.create(table, synthetic_table(4000, groups=40, seed=5), sort_by=["key"])
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > :t"
    captured = runner.invoke(
        app,
        ["capture", sql, "--name", f"{ns}_cli", "-p", "t=1000", "-a", f"{table}=a", "--fragments", "40"],
        env=env,
        terminal_width=200,
    )
    assert captured.exit_code == 0, captured.output
    assert f"captured {ns}_cli version 1" in captured.output
    assert f"{table}.a:" in captured.output and "of 40 fragments" in captured.output

    status = runner.invoke(app, ["status", f"{ns}_cli"], env=env, terminal_width=200)
    assert status.exit_code == 0, status.output
    assert "0 commits" in status.output and "capture succeeded" in status.output

    with_sketch = runner.invoke(
        app, ["query", sql, "-p", "t=1000", "--always", "--max-rows", "100"], env=env, terminal_width=200
    )
    without = runner.invoke(
        app, ["query", sql, "-p", "t=1000", "--no-sketches", "--max-rows", "100"], env=env, terminal_width=200
    )
    assert with_sketch.exit_code == 0 and without.exit_code == 0, with_sketch.output + without.output
    assert f"sketch {ns}_cli v1" in with_sketch.output and "no sketch" in without.output
    rows_with = sorted(line for line in with_sketch.output.splitlines() if line.startswith("│"))
    rows_without = sorted(line for line in without.output.splitlines() if line.startswith("│"))
    assert rows_with == rows_without and len(rows_with) > 1

    used = runner.invoke(app, ["status", f"{ns}_cli"], env=env, terminal_width=200)
    assert "last use read" in used.output and "files" in used.output, used.output

    spark_svc.tables.append(table, synthetic_table(10, groups=40, seed=6, key_start=4000))
    stale = runner.invoke(app, ["status", f"{ns}_cli"], env=env, terminal_width=200)
    assert "1 commits" in stale.output and "10" in stale.output

    maintained = runner.invoke(app, ["maintain", f"{ns}_cli", "--strategy", "incremental"], env=env)
    assert maintained.exit_code == 0, maintained.output
    assert "incremental" in maintained.output and "1 -> 2" in maintained.output
    fresh = runner.invoke(app, ["status", f"{ns}_cli"], env=env, terminal_width=200)
    assert "0 commits" in fresh.output and "incremental succeeded" in fresh.output
    # That run first built the state on Spark (the capture stored none): not an incremental
    # timing. The next one starts from the state it stored.
    spark_svc.tables.append(table, synthetic_table(10, groups=40, seed=7, key_start=5000))
    from_state = runner.invoke(app, ["maintain", f"{ns}_cli", "--strategy", "incremental"], env=env)
    assert from_state.exit_code == 0 and "2 -> 3" in from_state.output, from_state.output
    modelled = runner.invoke(app, ["costs", f"{ns}_cli"], env=env, terminal_width=200)
    assert modelled.exit_code == 0, modelled.output
    # One incremental run and one query with the sketch so far; the capture stands for recaptures.
    lines = {line.split()[1]: line for line in modelled.output.splitlines() if line.startswith("│")}
    assert "(1 runs)" in lines["incremental"] and "delta rows" in lines["incremental"]
    assert "(1 runs)" in lines["use"] and "(1 runs)" in lines["plain"] and "(1 runs)" in lines["full"]
    flags = [r["built_state"] for r in spark_svc.sketches.runs(f"{ns}_cli") if r["strategy"] == "incremental"]
    assert flags == [True, False]
    # By default a sketch is applied only where it is expected to pay, and the output says why.
    default = runner.invoke(app, ["query", sql, "-p", "t=1000"], env=env, terminal_width=200)
    assert default.exit_code == 0, default.output
    assert "sketch: use" in default.output or "sketch: skip" in default.output, default.output
    again_ok = runner.invoke(app, ["maintain", f"{ns}_cli"], env=env)
    assert "up to date" in again_ok.output
    bad = runner.invoke(app, ["maintain", f"{ns}_cli", "--strategy", "sometimes"], env=env)
    assert bad.exit_code != 0 and "unknown maintenance strategy" in bad.output
    # Named: `gc` alone would expire every table's history in the metastore the tests share.
    collected = runner.invoke(
        app, ["gc", f"{ns}_cli"], env={**env, "SKETCH_RETAIN_VERSIONS": "1", "SKETCH_RETAIN_SECONDS": "0"}
    )
    assert collected.exit_code == 0 and "expired" in collected.output, collected.output
    assert f"snapshots of {table}" in collected.output, collected.output
    assert spark_svc.sketches.versions(f"{ns}_cli") == [3]

    dropped = runner.invoke(app, ["drop", f"{ns}_cli"], env=env)
    assert dropped.exit_code == 0, dropped.output
    again = runner.invoke(app, ["drop", f"{ns}_cli"], env=env)
    assert again.exit_code == EXIT_TERMINAL and f"{ns}_cli" in again.output


def test_capture_refuses_bad_arguments(env: dict[str, str], spark_svc: SketchService, ns: str) -> None:
    runner = CliRunner()
    table = f"{ns}.events"
    spark_svc.tables.create(table, synthetic_table(100, groups=5, seed=5), sort_by=["key"])
    bad_param = runner.invoke(app, ["capture", f"SELECT * FROM {table}", "-p", "nonsense"], env=env)
    assert bad_param.exit_code == EXIT_TERMINAL and "NAME=VALUE" in bad_param.output
    unsafe = runner.invoke(
        app,
        ["capture", f"SELECT a, AVG(b) AS m FROM {table} GROUP BY a HAVING AVG(b) > 0", "-a", f"{table}=key"],
        env=env,
    )
    assert unsafe.exit_code == EXIT_TERMINAL and "key" in unsafe.output
    missing_file = runner.invoke(app, ["query", "@/nonexistent/report.sql"], env=env)
    assert missing_file.exit_code == EXIT_TERMINAL and "no SQL file" in missing_file.output


def test_validation_lists_overrides_and_declares(
    env: dict[str, str], spark_svc: SketchService, ns: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    monkeypatch.setattr(cli.console, "width", 400)  # whole reasons, not cells cut to fit
    table = f"{ns}.loads"
    spark_svc.tables.create(table, synthetic_table(500, groups=10, seed=8), sort_by=["a"])
    name = f"{ns}_gated"
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 0"
    spark_svc.capture(sql, name=name, attributes={table: "a"}, fragments=10)
    outlier = synthetic_table(5, groups=10, seed=9, key_start=1000)
    outlier = outlier.set_column(2, "b", pa.array([10**15] * 5, pa.int64()))
    seq = spark_svc.tables.append(table, outlier)
    validated = runner.invoke(app, ["validation", "run", table], env=env)
    assert validated.exit_code == EXIT_TERMINAL and "1 quarantined" in validated.output, validated.output
    assert f"{table}@{seq}" in validated.output
    blocked = runner.invoke(app, ["maintain", name], env=env, terminal_width=250)
    assert blocked.exit_code == EXIT_TERMINAL and "blocked" in blocked.output and "override" in blocked.output
    status = runner.invoke(app, ["status", name], env=env)
    assert "BLOCKED" in status.output and f"{table}@{seq}" in status.output, status.output
    listed = runner.invoke(app, ["validation", "list", table], env=env)
    assert listed.exit_code == 0 and str(seq) in listed.output and "learned domain" in listed.output
    no_reason = runner.invoke(app, ["validation", "override", table, str(seq)], env=env)
    assert no_reason.exit_code != 0 and "--reason" in no_reason.output
    wrong = runner.invoke(app, ["validation", "override", table, str(seq - 1), "--reason", "x"], env=env)
    assert wrong.exit_code == EXIT_TERMINAL and "not a quarantined batch" in wrong.output
    accepted = runner.invoke(
        app, ["validation", "override", table, str(seq), "--reason", "amounts in cents"], env=env
    )
    assert accepted.exit_code == 0, accepted.output
    maintained = runner.invoke(app, ["maintain", name], env=env)
    assert maintained.exit_code == 0 and "1 -> 2" in maintained.output, maintained.output
    every = runner.invoke(app, ["validation", "list", table, "--all"], env=env)
    assert "overridden" in every.output and "amounts in cents" in every.output
    declared = runner.invoke(app, ["validation", "nullable", table, "c", "nope"], env=env)
    assert declared.exit_code == EXIT_TERMINAL and "nope" in declared.output


def test_tables_advise_and_recluster(
    small_files: None, env: dict[str, str], spark_svc: SketchService, ns: str
) -> None:
    runner = CliRunner()
    table = f"{ns}.sales"
    spark_svc.tables.create(table, synthetic_table(30_000, groups=150, seed=7), sort_by=["key"])
    sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > :t"
    spark_svc.capture(sql, params={"t": 2500}, name=f"{ns}_adv", attributes={table: "a"}, fragments=60)
    spark_svc.query(sql, {"t": 2500}, use_sketches="always")

    advised = runner.invoke(app, ["tables", "advise", table], env=env, terminal_width=240)
    assert advised.exit_code == 0, advised.output
    assert "now" in advised.output and "sort(a) (recommended)" in advised.output, advised.output
    refused = runner.invoke(app, ["tables", "recluster", table, "--layout", "sort(a; b)"], env=env)
    assert refused.exit_code == EXIT_TERMINAL and "cannot read the layout" in refused.output
    rewritten = runner.invoke(app, ["tables", "recluster", table], env=env)
    assert rewritten.exit_code == 0, rewritten.output
    assert "rewrote" in rewritten.output and spark_svc.tables.commits(table)[-1].operation == "replace"


def test_policy_check_run_passes_over_a_due_sketch_whose_table_is_gone(
    env: dict[str, str], spark_svc: SketchService, ns: str
) -> None:
    runner = CliRunner()
    for label in ("gone", "kept"):
        table = f"{ns}.{label}"
        spark_svc.tables.create(table, synthetic_table(400, groups=8, seed=1), sort_by=["key"])
        sql = f"SELECT a, SUM(b) AS s FROM {table} GROUP BY a HAVING SUM(b) > 10"
        spark_svc.capture(sql, name=f"{ns}_{label}", attributes={table: "a"}, fragments=8)
        spark_svc.tables.append(table, synthetic_table(5, groups=8, seed=2, key_start=400))
    spark_svc.spark.sql(f"DROP TABLE lake.{ns}.gone")  # another engine's drop: nothing refuses it
    # (Each by name: all would maintain every test's sketches in the metastore the tests share.)
    passed_over = runner.invoke(app, ["policy", "check", f"{ns}_gone", "--run"], env=env, terminal_width=200)
    assert passed_over.exit_code == 0, passed_over.output
    ran = runner.invoke(app, ["policy", "check", f"{ns}_kept", "--run"], env=env, terminal_width=200)
    assert ran.exit_code == 0, ran.output
    assert f"{ns}_kept: incremental 1 -> 2" in ran.output or f"{ns}_kept: full 1 -> 2" in ran.output
    assert spark_svc.sketch(f"{ns}_gone").version == 1
    status = runner.invoke(app, ["status", f"{ns}_gone"], env=env)
    assert "BLOCKE" in status.output and "dropped" in status.output, status.output  # (wrapped at 80)
