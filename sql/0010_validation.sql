-- Delta validation (issue 8).
--
-- Each table's expectation suite (sketch_core.validation.suite, as JSON): its columns and
-- types, the value domains learned from its history, the columns declared nullable.
CREATE TABLE sketch.table_suites (
    table_id    bigint PRIMARY KEY REFERENCES sketch.tables (table_id),
    suite       jsonb NOT NULL,
    learned_seq bigint NOT NULL,  -- the newest commit whose rows the domains include
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);

-- One row per validated commit (a delta batch): passed, or failed with the expectations it
-- broke, or unchecked (its snapshots expired before any maintenance read it). A failed batch is quarantined until it is resolved: `fixed` when the net delta over
-- it passes (a later commit repaired the rows), or `overridden` by an operator, with why.
CREATE TABLE sketch.delta_validations (
    table_id     bigint NOT NULL REFERENCES sketch.tables (table_id),
    seq          bigint NOT NULL REFERENCES sketch.table_commits (seq),
    status       text NOT NULL CHECK (status IN ('passed', 'failed', 'fixed', 'overridden', 'unchecked')),
    failures     jsonb NOT NULL DEFAULT '[]',
    inserted_rows bigint NOT NULL CHECK (inserted_rows >= 0),
    deleted_rows  bigint NOT NULL CHECK (deleted_rows >= 0),
    checked_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    resolved_at  timestamptz,
    resolution   text,  -- how it was fixed, or the operator's reason
    fixed_at_seq bigint,  -- fixed: the commit from which on the net delta passes
    PRIMARY KEY (table_id, seq)
);
CREATE INDEX delta_validations_open ON sketch.delta_validations (table_id, seq) WHERE status = 'failed';
