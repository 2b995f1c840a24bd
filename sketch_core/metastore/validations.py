"""Repository for delta validation (sql/0010_validation.sql): each table's expectation suite,
and one result per validated commit, with how a failed one was resolved."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Engine, ScalarSelect, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert

from sketch_core.errors import TableNotFoundError
from sketch_core.metastore import schema as t
from sketch_core.metastore.commits import CommitLog
from sketch_core.metastore.engine import reading

PASSED, FAILED, FIXED, OVERRIDDEN, UNCHECKED = "passed", "failed", "fixed", "overridden", "unchecked"


@dataclass(frozen=True)
class Failure:
    """One expectation a batch did not meet."""

    expectation: str  # Great Expectations' name for it (or "expect_column_type" for types)
    column: str | None
    detail: str  # what was expected and what was found

    def to_json(self) -> dict[str, Any]:
        return {"expectation": self.expectation, "column": self.column, "detail": self.detail}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Failure:
        return cls(str(data["expectation"]), data.get("column"), str(data["detail"]))

    def __str__(self) -> str:
        return f"{self.column + ': ' if self.column else ''}{self.detail}"


@dataclass(frozen=True)
class BatchValidation:
    """The validation of one commit of ``table`` (a delta batch)."""

    table: str
    seq: int
    status: str
    failures: tuple[Failure, ...]
    inserted_rows: int
    deleted_rows: int
    checked_at: datetime
    resolution: str | None = None
    fixed_at_seq: int | None = None

    def blocks(self, target: int) -> bool:
        """Whether this batch keeps a sketch from being maintained to ``target``: it failed,
        and was neither overridden nor fixed by ``target`` (a target before the fixing commit
        still holds the bad rows)."""
        if self.status == FAILED:
            return True
        return self.status == FIXED and self.fixed_at_seq is not None and self.fixed_at_seq > target

    def reason(self) -> str:
        """One line: which batch, and what it broke."""
        broke = "; ".join(str(f) for f in self.failures) or "no failure recorded"
        return f"batch {self.table}@{self.seq} failed validation: {broke}"


class ValidationRepository:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    # -- suites ----------------------------------------------------------------------------
    def suite(self, table: str) -> tuple[dict[str, Any], int] | None:
        """The table's suite (its JSON form: see ``validation.suite.TableSuite``) and the
        newest commit its domains include."""
        s = t.table_suites.c
        with reading(self.engine) as conn:
            row = conn.execute(select(s.suite, s.learned_seq).where(s.table_id == _live_id(table))).first()
        return (dict(row.suite), int(row.learned_seq)) if row is not None else None

    def save_suite(self, table: str, suite: dict[str, Any], learned_seq: int) -> None:
        """Keep the table's suite (its JSON form), learned from commits through ``learned_seq``."""
        with self.engine.begin() as conn:
            values = {"suite": suite, "learned_seq": learned_seq, "updated_at": func.now()}
            conn.execute(
                pg_insert(t.table_suites)
                .values(table_id=_table_id(conn, table), **values)
                .on_conflict_do_update(index_elements=["table_id"], set_=values)
            )

    def required_columns(self, table: str) -> set[str]:
        """The columns that must have values: the table's sort key and the attributes of the
        partitions its sketches use."""
        tb, p = t.tables.c, t.partitions.c
        with reading(self.engine) as conn:
            sort_by = conn.execute(select(tb.sort_by).where(tb.name == table, t.LIVE_TABLES)).scalar()
            attributes = conn.execute(
                select(p.attribute).distinct().where(p.table_id == _live_id(table))
            ).scalars()
            return set(sort_by or ()) | set(attributes)

    # -- batch results ---------------------------------------------------------------------
    def record(
        self,
        table: str,
        seq: int,
        failures: Sequence[Failure],
        inserted_rows: int,
        deleted_rows: int,
        unchecked: str | None = None,
    ) -> None:
        """Store a commit's validation (a concurrent validator's result for it stands);
        ``unchecked``: why it could not be validated."""
        with self.engine.begin() as conn:
            conn.execute(
                pg_insert(t.delta_validations)
                .values(
                    table_id=_table_id(conn, table),
                    seq=seq,
                    status=UNCHECKED if unchecked else FAILED if failures else PASSED,
                    resolution=unchecked,
                    failures=[f.to_json() for f in failures],
                    inserted_rows=inserted_rows,
                    deleted_rows=deleted_rows,
                    checked_at=func.now(),
                )
                .on_conflict_do_nothing(index_elements=["table_id", "seq"])
            )

    def results(
        self, table: str, after: int | None = None, through: int | None = None
    ) -> list[BatchValidation]:
        """The table's validated commits in (``after``, ``through``], oldest first."""
        v = t.delta_validations.c
        with reading(self.engine) as conn:
            query = select(t.delta_validations).where(v.table_id == _live_id(table))
            if after is not None:
                query = query.where(v.seq > after)
            if through is not None:
                query = query.where(v.seq <= through)
            rows = conn.execute(query.order_by(v.seq)).mappings().all()
        return [_validation(table, row) for row in rows]

    def quarantined(self, tables: Sequence[str] | None = None) -> list[BatchValidation]:
        """The failed batches not yet resolved (of ``tables``; None: of every table)."""
        v, tb = t.delta_validations.c, t.tables.c
        query = (
            select(t.delta_validations, tb.name)
            .select_from(t.delta_validations.join(t.tables, tb.table_id == v.table_id))
            .where(v.status == FAILED)
            .order_by(v.seq)
        )
        if tables is not None:
            query = query.where(tb.name.in_(list(tables)))
        with reading(self.engine) as conn:
            rows = conn.execute(query).mappings().all()
        return [_validation(str(row["name"]), row) for row in rows]

    def fix(self, table: str, seqs: Sequence[int], fixed_at_seq: int, resolution: str) -> list[int]:
        """Mark these failed batches fixed from commit ``fixed_at_seq`` on (a fixed one that
        was fixed from a later commit moves to this earlier one); returns those changed."""
        v = t.delta_validations.c
        return self._resolve(
            table,
            seqs,
            (v.status == FAILED) | ((v.status == FIXED) & (v.fixed_at_seq > fixed_at_seq)),
            status=FIXED,
            fixed_at_seq=fixed_at_seq,
            resolution=resolution,
        )

    def override(self, table: str, seq: int, reason: str) -> bool:
        """Accept a failed batch (or one fixed only by a later commit); False: none such."""
        v = t.delta_validations.c
        return bool(
            self._resolve(
                table,
                [seq],
                v.status.in_([FAILED, FIXED]),
                status=OVERRIDDEN,
                fixed_at_seq=None,
                resolution=reason,
            )
        )

    def _resolve(self, table: str, seqs: Sequence[int], where: Any, **values: Any) -> list[int]:
        v = t.delta_validations.c
        with self.engine.begin() as conn:
            rows = conn.execute(
                update(t.delta_validations)
                .where(v.table_id == _table_id(conn, table), v.seq.in_(list(seqs)), where)
                .values(resolved_at=func.now(), **values)
                .returning(v.seq)
            ).all()
        return sorted(int(r.seq) for r in rows)


def _live_id(table: str) -> ScalarSelect[Any]:
    """The live table's id as a subquery: reads look it up in the same round trip (a table
    that is gone reads as having nothing; writes use :func:`_table_id`, which says so)."""
    tb = t.tables.c
    return select(tb.table_id).where(tb.name == table, t.LIVE_TABLES).scalar_subquery()


def _table_id(conn: Connection, table: str) -> int:
    table_id = CommitLog.table_id(conn, table)
    if table_id is None:
        raise TableNotFoundError(table)
    return table_id


def _validation(table: str, row: Any) -> BatchValidation:
    return BatchValidation(
        table,
        int(row["seq"]),
        str(row["status"]),
        tuple(Failure.from_json(f) for f in row["failures"]),
        int(row["inserted_rows"]),
        int(row["deleted_rows"]),
        row["checked_at"],
        row["resolution"],
        row["fixed_at_seq"],
    )
