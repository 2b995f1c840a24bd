from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect, text

from sketch_core.errors import MigrationChecksumError, MigrationError, SchemaTooNewError
from sketch_core.metastore import migrate
from sketch_core.metastore.engine import connect_metastore
from sketch_core.metastore.migrations import current_version, discover
from sketch_core.metastore.schema import metadata

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"


def test_fresh_database_gets_every_migration(fresh_engine: Engine) -> None:
    expected = [m.version for m in discover(SQL_DIR)]
    report = migrate(fresh_engine, SQL_DIR)
    assert report.applied == expected
    assert report.current_version == expected[-1] == current_version(fresh_engine)


def test_rerun_applies_nothing(fresh_engine: Engine) -> None:
    migrate(fresh_engine, SQL_DIR)
    again = migrate(fresh_engine, SQL_DIR)
    assert again.applied == []
    assert again.current_version == len(discover(SQL_DIR))


def test_concurrent_runners_apply_each_migration_once(fresh_engine: Engine) -> None:
    url = fresh_engine.url.render_as_string(hide_password=False)
    reports, errors = [], []

    def run() -> None:
        engine = connect_metastore(url)
        try:
            reports.append(migrate(engine, SQL_DIR))
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    applied = sorted(v for report in reports for v in report.applied)
    assert applied == [m.version for m in discover(SQL_DIR)]
    with fresh_engine.connect() as conn:
        rows = conn.execute(text("SELECT version, count(*) FROM sketch.schema_migrations GROUP BY version"))
        assert all(count == 1 for _, count in rows)


def test_refuses_to_downgrade(fresh_engine: Engine) -> None:
    migrate(fresh_engine, SQL_DIR)
    with fresh_engine.begin() as conn:
        conn.execute(text("INSERT INTO sketch.schema_migrations VALUES (99, 'future', 'x')"))
    with pytest.raises(SchemaTooNewError) as info:
        migrate(fresh_engine, SQL_DIR)
    assert info.value.database_version == 99
    assert info.value.code_version == len(discover(SQL_DIR))


def test_detects_an_edited_migration(fresh_engine: Engine, tmp_path: Path) -> None:
    migrate(fresh_engine, SQL_DIR)
    edited = tmp_path / "sql"
    edited.mkdir()
    for path in SQL_DIR.glob("*.sql"):
        (edited / path.name).write_text(path.read_text() + "\n-- edited\n")
    with pytest.raises(MigrationChecksumError) as info:
        migrate(fresh_engine, edited)
    assert info.value.version == 1


def test_failed_migration_leaves_nothing_behind(fresh_engine: Engine, tmp_path: Path) -> None:
    broken = tmp_path / "sql"
    broken.mkdir()
    (broken / "0001_ok.sql").write_text("CREATE TABLE sketch.ok (id int);")
    (broken / "0002_broken.sql").write_text("CREATE TABLE sketch.half (id int); SELECT no_such_function();")
    with pytest.raises(MigrationError, match="migration 2"):
        migrate(fresh_engine, broken)
    assert current_version(fresh_engine) == 1
    assert not inspect(fresh_engine).has_table("half", schema="sketch")


def test_rejects_gaps_in_numbering(tmp_path: Path) -> None:
    (tmp_path / "0001_a.sql").write_text("SELECT 1;")
    (tmp_path / "0003_c.sql").write_text("SELECT 1;")
    with pytest.raises(MigrationError, match="without gaps"):
        discover(tmp_path)


def test_core_schema_matches_the_sql_files(fresh_engine: Engine) -> None:
    migrate(fresh_engine, SQL_DIR)
    inspector = inspect(fresh_engine)
    for table in metadata.sorted_tables:
        in_db = {c["name"] for c in inspector.get_columns(table.name, schema="sketch")}
        assert in_db == {c.name for c in table.columns}, table.name
