"""The commit log answers recent questions from memory and stays exact: commits made through
another connection are seen, and old sequences are still answered from the database."""

from __future__ import annotations

from sketch_core.datasets import synthetic_table
from sketch_core.metastore.commits import CommitLog
from sketch_core.service import SketchService
from tests.metastore.statements import counted_statements


def _uncached(log: CommitLog) -> CommitLog:
    return CommitLog(log.engine)


def test_commit_log_matches_the_database_before_and_after_new_commits(svc: SketchService, ns: str) -> None:
    a, b = f"{ns}.a", f"{ns}.b"
    first = svc.tables.create(a, synthetic_table(10, groups=2), sort_by=["key"])
    svc.tables.create(b, synthetic_table(10, groups=2), sort_by=["key"])
    svc.tables.append(a, synthetic_table(5, groups=2, key_start=100))

    log = CommitLog(svc.engine)  # its window starts here
    start = log.latest_sequence()
    # Commits through another log (another process, as far as this one knows).
    later = [svc.tables.append(b, synthetic_table(3, groups=2, key_start=200 + i * 10)) for i in range(3)]
    later.append(svc.tables.delete(a, "key < 3"))

    assert log.latest_sequence() == _uncached(log).latest_sequence() == later[-1]
    for seq in [None, first - 1, first, start, *later, later[-1] + 5]:
        for table in (a, b, f"{ns}.never"):
            assert log.commit_at(table, seq) == _uncached(log).commit_at(table, seq), (table, seq)
    for after in [0, first, start, later[0], later[-1]]:
        for until in [None, later[1], later[-1]]:
            for table in (a, b, None):
                expected = _uncached(log).commits(table, after_seq=after, until_seq=until)
                assert log.commits(table, after_seq=after, until_seq=until) == expected, (table, after, until)
    newest_a, newest_b = log.newest_seen(a), log.newest_seen(b)
    assert newest_a is not None and newest_a.seq == later[-1]
    assert newest_b is not None and newest_b.seq == later[2]
    # Each commit knows the metadata file its pointer change set: the table's current one.
    assert newest_a.metadata_location == svc.tables.catalog.load_table(a).metadata_location


def test_a_name_dropped_and_created_again_has_the_new_tables_history_only(
    svc: SketchService, ns: str
) -> None:
    name, other = f"{ns}.a", f"{ns}.b"
    first = svc.tables.create(name, synthetic_table(10, groups=2), sort_by=["key"])
    svc.tables.create(other, synthetic_table(10, groups=2), sort_by=["key"])
    old_append = svc.tables.append(name, synthetic_table(5, groups=2, key_start=100))
    log = CommitLog(svc.engine)  # its window holds the old table's commits
    log.latest_sequence()
    old_id = svc.tables.record(name).table_id

    dropped = svc.drop_table(name)
    assert log.latest_sequence() == dropped
    assert log.superseded(name, old_id) and not log.superseded(other, svc.tables.record(other).table_id)
    assert log.commit_at(name, None) is None and log.newest_seen(name) is None
    fresh = _uncached(log)  # its window starts after the drop
    assert fresh.commit_at(name, None) is None and fresh.commits(name) == []
    assert fresh.latest_sequence() == dropped and fresh.superseded(name, old_id)
    created = svc.tables.create(name, synthetic_table(4, groups=2), sort_by=["key"])
    appended = svc.tables.append(name, synthetic_table(2, groups=2, key_start=50))
    log.latest_sequence()
    assert log.superseded(name, old_id) and not log.superseded(name, svc.tables.record(name).table_id)

    for seq in [None, first, old_append, dropped, created, appended]:
        assert log.commit_at(name, seq) == _uncached(log).commit_at(name, seq), seq
    assert log.commit_at(name, old_append) is None, "the old table's sequences are not this table's"
    for after in [0, first, dropped, created]:
        assert log.commits(name, after_seq=after) == _uncached(log).commits(name, after_seq=after), after
    assert [c.seq for c in log.commits(name)] == [created, appended]
    everything = [(c.seq, c.operation) for c in log.commits(after_seq=first - 1) if c.table == name]
    assert everything == [
        (first, "create"),
        (old_append, "append"),
        (dropped, "drop"),
        (created, "create"),
        (appended, "append"),
    ]


def test_old_sequences_are_read_once_and_asked_again_after_a_drop(svc: SketchService, ns: str) -> None:
    """A maintenance run asks about its version's (older) commit many times: the database is
    asked once; a drop of the name changes the answer, and it is asked again."""
    name = f"{ns}.a"
    first = svc.tables.create(name, synthetic_table(10, groups=2), sort_by=["key"])
    appended = svc.tables.append(name, synthetic_table(5, groups=2, key_start=100))
    svc.tables.append(name, synthetic_table(5, groups=2, key_start=200))
    log = CommitLog(svc.engine)
    log.latest_sequence()  # the window starts at the newest commit
    with counted_statements(svc.engine) as statements:
        expected_at = _uncached(log).commit_at(name, appended)
        expected_between = _uncached(log).commits(name, after_seq=first - 1, until_seq=appended)
        statements.clear()
        for _ in range(3):
            assert log.commit_at(name, appended) == expected_at
            assert log.commits(name, after_seq=first - 1, until_seq=appended) == expected_between
        assert len(statements) == 2, statements
    assert expected_at is not None and expected_at.seq == appended
    assert [c.seq for c in expected_between] == [first, appended]

    svc.drop_table(name)
    log.latest_sequence()  # the window sees the drop
    assert log.commit_at(name, appended) is None, "the name bears no table now"
    assert log.commits(name, after_seq=first - 1, until_seq=appended) == []


def test_a_refresh_reads_the_new_commits_in_the_statement_that_asks_for_them(
    svc: SketchService, ns: str
) -> None:
    """Every maintenance run and query starts by bringing the window up to date: once it holds
    commits, that is one round trip, with or without new commits to read."""
    name = f"{ns}.a"
    svc.tables.create(name, synthetic_table(10, groups=2), sort_by=["key"])
    log = CommitLog(svc.engine)
    log.latest_sequence()  # the window starts here
    appended = [
        svc.tables.append(name, synthetic_table(3, groups=2, key_start=100 + 10 * i)) for i in range(2)
    ]
    with counted_statements(svc.engine) as statements:
        assert log.latest_sequence() == appended[-1]
        assert len(statements) == 1, statements
        statements.clear()
        assert log.latest_sequence() == appended[-1]  # nothing new
        assert len(statements) == 1, statements
    assert [c.seq for c in log.commits(name, after_seq=appended[0] - 1)] == appended
