-- Metastore schema, version 1: tables and their commits, partitions, sketches, sketch
-- versions, maintenance runs. Everything lives in the `sketch` schema; PyIceberg's SQL catalog
-- keeps its own iceberg_* tables in the default schema of the same database.

-- The global commit sequence number: the snapshot-isolation version of the whole database.
-- Numbers are taken under a global transaction-scoped advisory lock, so their order is the
-- order in which commits become visible (a reader at N never sees N-1 appear later).
CREATE SEQUENCE sketch.commit_seq AS bigint START 1;

CREATE TABLE sketch.tables (
    table_id     bigserial PRIMARY KEY,
    name         text NOT NULL UNIQUE CHECK (name ~ '^[a-z_][a-z0-9_]*\.[a-z_][a-z0-9_]*$'),
    sort_by      text[] NOT NULL DEFAULT '{}',
    created_seq  bigint NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

-- One row per commit that changed a table. snapshot_id is the Iceberg snapshot that is current
-- after the commit (NULL only for a table created without data).
CREATE TABLE sketch.table_commits (
    seq                 bigint PRIMARY KEY,
    table_id            bigint NOT NULL REFERENCES sketch.tables (table_id),
    snapshot_id         bigint,
    parent_snapshot_id  bigint,
    operation           text NOT NULL CHECK (operation IN ('create', 'append', 'delete', 'overwrite')),
    added_rows          bigint NOT NULL DEFAULT 0 CHECK (added_rows >= 0),
    deleted_rows        bigint NOT NULL DEFAULT 0 CHECK (deleted_rows >= 0),
    added_files         integer NOT NULL DEFAULT 0,
    removed_files       integer NOT NULL DEFAULT 0,
    total_rows          bigint NOT NULL DEFAULT 0,
    committed_at        timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (table_id, snapshot_id)
);
CREATE INDEX table_commits_by_table ON sketch.table_commits (table_id, seq DESC);

-- Range partitions F(R, a): `boundaries` holds the fragment ranges as JSON.
CREATE TABLE sketch.partitions (
    partition_id     bigserial PRIMARY KEY,
    table_id         bigint NOT NULL REFERENCES sketch.tables (table_id),
    attribute        text NOT NULL,
    fragment_count   integer NOT NULL CHECK (fragment_count > 0),
    boundaries       jsonb NOT NULL,
    computed_at_seq  bigint NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    UNIQUE (table_id, attribute, fragment_count)
);

CREATE TABLE sketch.sketches (
    sketch_id   bigserial PRIMARY KEY,
    name        text NOT NULL UNIQUE,
    query_sql   text NOT NULL,
    params      jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- A sketch version is valid for exactly the table snapshots it records (design invariant 1).
CREATE TABLE sketch.sketch_versions (
    sketch_id        bigint NOT NULL REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    version          integer NOT NULL CHECK (version > 0),
    seq              bigint NOT NULL,
    table_snapshots  jsonb NOT NULL,
    state_ref        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sketch_id, version),
    UNIQUE (sketch_id, seq)
);

-- Per version and partitioned table: the roaring bitmap of fragment ids.
CREATE TABLE sketch.sketch_fragments (
    sketch_id     bigint NOT NULL,
    version       integer NOT NULL,
    partition_id  bigint NOT NULL REFERENCES sketch.partitions (partition_id),
    bitmap        bytea NOT NULL,
    PRIMARY KEY (sketch_id, version, partition_id),
    FOREIGN KEY (sketch_id, version)
        REFERENCES sketch.sketch_versions (sketch_id, version) ON DELETE CASCADE
);

CREATE TABLE sketch.maintenance_runs (
    run_id        bigserial PRIMARY KEY,
    sketch_id     bigint NOT NULL REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    from_version  integer,
    to_version    integer,
    strategy      text NOT NULL CHECK (strategy IN ('capture', 'incremental', 'full')),
    status        text NOT NULL CHECK (status IN ('running', 'succeeded', 'failed')),
    delta_rows    bigint NOT NULL DEFAULT 0,
    seconds       double precision,
    error         text,
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz
);
CREATE INDEX maintenance_runs_by_sketch ON sketch.maintenance_runs (sketch_id, started_at DESC);
