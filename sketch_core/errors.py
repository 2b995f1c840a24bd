"""Typed errors of sketch_core.

Every error derives from :class:`SketchError`, keeps the inputs that caused it as attributes,
and says what to do next. ``transient`` tells schedulers (Airflow) whether a retry can help:
transient errors come from the environment (a busy metastore, a lost commit race), terminal
ones from the request itself (an unknown table, a bad predicate), which no retry fixes.
"""

from __future__ import annotations

from collections.abc import Sequence


class SketchError(Exception):
    """Root of all errors raised by sketch_core."""

    transient: bool = False

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        self.message = message
        self.hint = hint
        super().__init__(f"{message} ({hint})" if hint else message)


class ConfigurationError(SketchError):
    """The environment or settings are unusable (missing tool, bad URL, bad value)."""


class InfrastructureError(SketchError):
    """A service the project starts or talks to (PostgreSQL, Spark) is not available."""

    transient = True


class MetastoreUnavailableError(InfrastructureError):
    """The metastore database cannot be reached."""

    def __init__(self, url: str, cause: str) -> None:
        self.url = url
        self.cause = cause
        super().__init__(
            f"cannot reach the metastore at {url}: {cause}",
            hint="check SKETCH_METASTORE_URL and that the server is running; retrying may help",
        )


class MetastoreDatabaseMissingError(ConfigurationError):
    """The metastore's server answers, but the database the URL names does not exist: no
    retry creates it."""

    def __init__(self, url: str, database: str) -> None:
        self.url = url
        self.database = database
        super().__init__(
            f"the metastore database {database!r} does not exist on the server of {url}",
            hint=f'create it (createdb {database}, or CREATE DATABASE "{database}"); for the private '
            "server, `sketch server start` creates and migrates it",
        )


class MigrationError(SketchError):
    """The metastore schema cannot be brought to this code's version."""


class SchemaTooNewError(MigrationError):
    """The database was migrated by a newer release; downgrading is refused."""

    def __init__(self, database_version: int, code_version: int) -> None:
        self.database_version = database_version
        self.code_version = code_version
        super().__init__(
            f"the metastore schema is at version {database_version}, newer than this code's "
            f"latest migration {code_version}; refusing to downgrade",
            hint="upgrade sketch-skipping, or point SKETCH_METASTORE_URL at another database",
        )


class MigrationChecksumError(MigrationError):
    """An applied migration differs from the file of the same version on disk."""

    def __init__(self, version: int, name: str) -> None:
        self.version = version
        self.name = name
        super().__init__(
            f"migration {version} ({name}) was changed after it was applied",
            hint="never edit an applied migration; add a new numbered migration instead",
        )


class TableError(SketchError):
    """Root of errors about tables and their data."""


class InvalidTableNameError(TableError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"invalid table name {name!r}",
            hint="use 'namespace.table' with letters, digits and underscores, starting with a letter",
        )


class TableNotFoundError(TableError):
    def __init__(self, name: str, known: Sequence[str] = ()) -> None:
        self.name = name
        self.known = list(known)
        shown = ", ".join(self.known[:10]) or "none"
        super().__init__(
            f"unknown table {name!r}",
            hint=f"create it first with tables.create; known tables: {shown}",
        )


class SketchTableDroppedError(TableError):
    """A table a sketch reads was dropped (by any engine) after the sketch's newest version: no
    version can serve the table's later snapshots, nor of a table created again under its name."""

    def __init__(self, sketch: str, table: str, sequence: int) -> None:
        self.sketch = sketch
        self.table = table
        self.sequence = sequence
        super().__init__(
            f"sketch {sketch!r} reads {table}, which was dropped (or renamed) at commit sequence {sequence}: "
            "it cannot be maintained past that commit",
            hint=f"drop the sketch (`sketch drop {sketch}` or svc.drop_sketch) and capture the report "
            "again once the table exists",
        )


class ColumnsDroppedError(TableError):
    """Columns a sketch's query reads were dropped from a table (by another engine: the table
    service refuses drops): the query no longer runs on the table, so no later version can be
    maintained."""

    def __init__(self, table: str, columns: Sequence[str]) -> None:
        self.table = table
        self.columns = list(columns)
        super().__init__(
            f"{table} has no column {', '.join(self.columns)} any more (dropped or renamed), "
            "which the sketch's query reads: it cannot be maintained past that change",
            hint="drop the sketch (`sketch drop NAME` or svc.drop_sketch) and capture the report again "
            "once its query runs on the table",
        )


class TableExistsError(TableError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"table {name!r} already exists", hint="append to it, or pick another name")


class SchemaMismatchError(TableError):
    """Data given to append/overwrite does not fit the table's schema."""

    def __init__(self, table: str, problems: Sequence[str]) -> None:
        self.table = table
        self.problems = list(problems)
        super().__init__(
            f"data does not match the schema of {table!r}: " + "; ".join(self.problems),
            hint="cast or rename the columns to the table's schema (see `sketch tables list`)",
        )


class InvalidDataError(TableError):
    """Data could not be read or is unusable (bad path, not Parquet, empty sort key...)."""


class InvalidPredicateError(TableError):
    """A row predicate (delete/overwrite) cannot be parsed or does not fit the table."""

    def __init__(self, table: str, predicate: str, reason: str) -> None:
        self.table = table
        self.predicate = predicate
        self.reason = reason
        super().__init__(
            f"invalid predicate for {table!r}: {reason}: {predicate!r}",
            hint="use comparisons of columns with literals combined by AND/OR/NOT, "
            "IN, BETWEEN, IS [NOT] NULL or LIKE 'prefix%'",
        )


class CommitConflictError(TableError):
    """Concurrent writers kept winning the commit race; nothing was committed."""

    transient = True

    def __init__(self, table: str, attempts: int) -> None:
        self.table = table
        self.attempts = attempts
        super().__init__(
            f"commit to {table!r} lost to concurrent writers {attempts} times; nothing was committed",
            hint="retry the operation; it is safe because no partial commit happened",
        )


class TableInUseError(TableError):
    """A table to drop is still read by sketches; nothing was dropped."""

    def __init__(self, table: str, sketches: Sequence[str]) -> None:
        self.table = table
        self.sketches = sorted(sketches)
        super().__init__(
            f"table {table!r} is read by sketches {', '.join(self.sketches)}; nothing was dropped",
            hint="drop those sketches first (`sketch drop NAME`), or drop the table with them "
            "(drop_table(..., cascade=True), `sketch tables drop NAME --cascade`)",
        )


class SnapshotNotFoundError(TableError):
    """No table state exists at the requested commit sequence number."""

    def __init__(self, table: str, sequence: int) -> None:
        self.table = table
        self.sequence = sequence
        super().__init__(
            f"table {table!r} did not exist at commit sequence {sequence}",
            hint="use a sequence number at or after the table's creation (`sketch tables commits`)",
        )


class SnapshotExpiredError(SnapshotNotFoundError):
    """The table's state at the requested sequence was expired by garbage collection."""

    def __init__(self, table: str, sequence: int) -> None:
        self.table = table
        self.sequence = sequence
        TableError.__init__(
            self,
            f"the snapshot of {table!r} at commit sequence {sequence} has expired",
            hint="read a newer sequence; to keep table history longer, raise SKETCH_RETAIN_SECONDS "
            "or set SKETCH_EXPIRE_TABLE_SNAPSHOTS=off",
        )


class WarehouseMismatchError(TableError):
    """The metastore names files that the warehouse does not have."""

    def __init__(self, table: str, detail: str) -> None:
        self.table = table
        self.detail = detail
        super().__init__(
            f"the metadata of {table!r} is missing from the warehouse ({detail})",
            hint="SKETCH_WAREHOUSE and SKETCH_METASTORE_URL must belong together: restore the "
            "warehouse, or use a fresh metastore database for a new warehouse",
        )


class SequenceOutOfRangeError(TableError):
    """A commit sequence number that no commit has reached (yet)."""

    def __init__(self, sequence: int, latest: int) -> None:
        self.sequence = sequence
        self.latest = latest
        super().__init__(
            f"commit sequence {sequence} is out of range; the latest commit is {latest}",
            hint="pass a sequence between 1 and the latest, or None for the latest",
        )


class DeltaRangeError(TableError):
    """A delta asked for backwards: deltas run from an older commit to a newer one."""

    def __init__(self, table: str, from_sequence: int, to_sequence: int) -> None:
        self.table = table
        self.from_sequence = from_sequence
        self.to_sequence = to_sequence
        super().__init__(
            f"a delta of {table} must run forward, but sequence {from_sequence} is after {to_sequence}",
            hint="pass the older commit sequence number first",
        )


class UnsupportedTableFeatureError(TableError):
    """The Iceberg table uses a feature the readers here cannot honour."""


class QueryError(SketchError):
    """A query cannot be parsed or names tables that do not exist."""


class SamplingError(SketchError):
    """A sample (for the attribute choice's estimates) cannot be drawn or used as asked."""


class DatasetError(SketchError):
    """Generating or loading a benchmark data set failed."""


class SketchNotFoundError(SketchError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"unknown sketch {name!r}", hint="capture it first, or list sketches with `sketch status`"
        )


class UnsupportedQueryError(QueryError):
    """The query uses a construct the sketch front end or a rewrite has no rule for.

    ``construct`` names the construct (for example ``LEFT JOIN``); ``location`` is the SQL of
    the smallest enclosing piece of the query, so a user can find it.
    """

    def __init__(self, construct: str, location: str, *, hint: str | None = None) -> None:
        self.construct = construct
        self.location = location
        super().__init__(
            f"unsupported: {construct} in {location[:200]!r}",
            hint=hint or "rewrite the query without it, or run it with use_sketches=False",
        )


class IncrementalTooCostlyError(UnsupportedQueryError):
    """An incremental run would cost far more than a recapture (a window whose rows each carry
    thousands of fragments). ``auto`` recaptures, and keeps recapturing for a day before it
    tries again (the sketch's state mode says why)."""

    def __init__(self, what: str, location: str) -> None:
        super().__init__(what, location, hint="maintain this sketch with strategy='full' (auto does)")


class UnqualifiedTableError(QueryError):
    """A table is named without its namespace: the service reads ``ns.table`` names only."""


class MissingParameterError(QueryError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"the query uses :{name} but params has no value for it", hint=f"pass params={{'{name}': ...}}"
        )


class UnsafeAttributeError(SketchError):
    """A requested sketch attribute is not safe for the query (PBDS Sec. 6)."""

    def __init__(self, table: str, attribute: str, reason: str) -> None:
        self.table = table
        self.attribute = attribute
        self.reason = reason
        super().__init__(
            f"a sketch on {table}.{attribute} is not safe for this query: {reason}",
            hint="choose a group-by or sort-key attribute, or let the project choose (attributes=None)",
        )


class InvalidSketchNameError(SketchError):
    """A sketch name the metastore cannot hold or a person could not read back."""

    def __init__(self, name: str, problem: str) -> None:
        self.name = name
        self.problem = problem
        super().__init__(
            f"invalid sketch name {name!r}: {problem}",
            hint="use 1 to 200 printable characters (any quotes, slashes or SQL are just characters)",
        )


class SketchExistsError(SketchError):
    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(
            f"a sketch named {name!r} already exists for a different query",
            hint="choose another name, or drop the existing sketch first",
        )


class SketchBusyError(SketchError):
    """Another run (a capture, a maintenance run) of the sketch held it for longer than this
    one would wait; transient: a retry after it finished finds the work done or does it."""

    transient = True

    def __init__(self, name: str, what: str, holder: str, waited_seconds: float) -> None:
        self.name = name
        super().__init__(
            f"{what} of {name} waited {waited_seconds:.0f} s for another run of it: {holder}",
            hint="retry once that run has finished, or raise settings.work_wait_seconds",
        )


class StateMissingError(SketchError):
    """A sketch version's operator state cannot be read (removed, or from another release)."""

    def __init__(self, ref: str, reason: str = "its files are missing") -> None:
        self.ref = ref
        self.reason = reason
        super().__init__(
            f"the operator state at {ref} cannot be used: {reason}",
            hint="maintain with strategy='full' (a recapture), which needs no state",
        )


class KeptValuesExhaustedError(SketchError):
    """Top-m state (IMP 9.4.3) lost all its kept values: the next extreme is not known.

    Maintenance recaptures the sketch when this happens, whatever the strategy asked for.
    """

    def __init__(self, operator: str, kept: int) -> None:
        self.operator = operator
        self.kept = kept
        super().__init__(
            f"the {operator} kept only its top {kept} values and deletions used them all up",
            hint="maintenance recaptures the sketch; raise SKETCH_KEEP_TOP_M (0 keeps everything) "
            "if this happens often",
        )


class NoSafeAttributeError(SketchError):
    """No table the query reads has a candidate attribute that is safe to sketch on."""

    def __init__(self, tables: Sequence[str], reasons: str) -> None:
        self.tables = list(tables)
        self.reasons = reasons
        super().__init__(
            f"no safe sketch attribute for {', '.join(self.tables) or 'any table'}: {reasons}",
            hint="pass attributes={table: column} with a group-by column, or run the query without a sketch",
        )


class PolicyError(SketchError):
    """A maintenance policy that cannot be evaluated (no condition, a bad threshold or name)."""

    def __init__(self, problem: str, spec: object) -> None:
        self.problem = problem
        self.spec = spec
        super().__init__(
            f"invalid maintenance policy {spec!r}: {problem}",
            hint="give at least one of delta_rows >= 1, elapsed_seconds > 0, before_reports; "
            "combine is 'any' or 'all'",
        )


class DeltaQuarantinedError(SketchError):
    """A delta batch a sketch would be maintained with failed validation: the sketch stays at
    its last good version (queries at newer snapshots run without it) until the batch is fixed
    by a later commit or an operator overrides it."""

    def __init__(self, sketch: str, batches: Sequence[tuple[str, int, str]]) -> None:
        self.sketch = sketch
        self.batches = list(batches)  # (table, commit sequence, what it broke)
        shown = "; ".join(f"{table}@{seq}: {why}" for table, seq, why in self.batches[:3])
        more = f" (and {len(self.batches) - 3} more)" if len(self.batches) > 3 else ""
        first_table, first_seq, _ = self.batches[0]
        super().__init__(
            f"{sketch} is blocked: delta batches failed validation: {shown}{more}",
            hint="fix the rows with a later commit (maintenance resumes once the net delta passes), "
            f"or accept the batch: sketch validation override {first_table} {first_seq} --reason ...",
        )


class ValidationOverrideError(SketchError):
    """An override names a batch that is not quarantined."""

    def __init__(self, table: str, seq: int, status: str | None) -> None:
        self.table = table
        self.seq = seq
        self.status = status
        found = f"its validation {status}" if status else "it was never validated"
        super().__init__(
            f"commit {seq} of {table} is not a quarantined batch ({found})",
            hint="sketch validation list shows the quarantined batches",
        )


class SparkJobError(InfrastructureError):
    """A Spark job failed while running (an executor lost, a task failing, the cluster gone):
    transient, a retry may succeed. Errors in the query itself (analysis) are not this."""

    def __init__(self, what: str, cause: str) -> None:
        self.what = what
        self.cause = cause
        super().__init__(
            f"the Spark job of {what} failed: {cause}",
            hint="retry (Airflow does, for transient errors); if it keeps failing, see the Spark logs",
        )


class SparkQueryError(QueryError):
    """Spark refused the query (a syntax or analysis error: an unknown function or column) or
    the query failed on its data (a division by zero or a malformed cast under ANSI mode): the
    query's fault, so terminal; a retry fails the same way."""

    def __init__(self, what: str, cause: str, sql_state: str | None = None) -> None:
        self.what = what
        self.cause = cause
        self.sql_state = sql_state
        super().__init__(
            f"Spark cannot run {what}: {cause}",
            hint="fix the query (try it in Spark SQL); data errors have try_ variants (try_divide, try_cast)",
        )
