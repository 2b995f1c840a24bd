-- Every commit to the Iceberg catalog gets its global sequence number, whichever engine made it
-- (Spark's Iceberg runtime through the JDBC catalog, PyIceberg, this project's table service).
--
-- An Iceberg commit, in any engine, ends by swapping the table's metadata pointer in
-- iceberg_tables (an UPDATE with the old pointer as its condition; an INSERT creates a table, a
-- DELETE drops it). A trigger on that table draws the sequence number in the same transaction,
-- under the commit lock (sketch_core.metastore.commits.COMMIT_LOCK_KEY), which it holds until the
-- transaction ends: numbers are drawn in the order commits become visible, and a commit that
-- rolls back leaves only a gap. The trigger cannot read a commit's details (they are in the
-- metadata file it points to), so it only writes the pointer change; the table service reads the
-- metadata and records the commit in sketch.table_commits later ("recorded"), before any reader
-- is shown a later sequence (sketch_core.tables.ingest).

-- The catalog's own tables, created here (if no catalog has yet) so the trigger can be attached;
-- the columns are those Iceberg's JDBC catalog (schema V1) and PyIceberg's SQL catalog create.
-- Unqualified: they live where the catalogs' unqualified names find them.
CREATE TABLE IF NOT EXISTS iceberg_tables (
    catalog_name               varchar(255) NOT NULL,
    table_namespace            varchar(255) NOT NULL,
    table_name                 varchar(255) NOT NULL,
    metadata_location          varchar(1000),
    previous_metadata_location varchar(1000),
    iceberg_type               varchar(5),
    PRIMARY KEY (catalog_name, table_namespace, table_name)
);
ALTER TABLE iceberg_tables ADD COLUMN IF NOT EXISTS iceberg_type varchar(5);
CREATE TABLE IF NOT EXISTS iceberg_namespace_properties (
    catalog_name   varchar(255) NOT NULL,
    namespace      varchar(255) NOT NULL,
    property_key   varchar(255) NOT NULL,
    property_value varchar(1000),
    PRIMARY KEY (catalog_name, namespace, property_key)
);

CREATE TABLE sketch.catalog_commits (
    seq                        bigint PRIMARY KEY,
    catalog_name               text NOT NULL,
    table_namespace            text NOT NULL,
    table_name                 text NOT NULL,
    kind                       text NOT NULL CHECK (kind IN ('create', 'commit', 'drop', 'rename')),
    metadata_location          text,
    previous_metadata_location text,
    -- A rename's old name.
    previous_namespace         text,
    previous_name              text,
    committed_at               timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- Whether sketch.table_commits holds it (or it changed no rows, or is not this project's).
    recorded                   boolean NOT NULL DEFAULT false
);
CREATE INDEX catalog_commits_unrecorded ON sketch.catalog_commits (seq) WHERE NOT recorded;

CREATE FUNCTION sketch.number_catalog_commit() RETURNS trigger
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_seq  bigint;
    v_kind text;
    v_row  record;
BEGIN
    IF TG_OP = 'DELETE' THEN
        v_row := OLD;
        v_kind := 'drop';
    ELSE
        v_row := NEW;
        v_kind := CASE
            WHEN TG_OP = 'INSERT' THEN 'create'
            WHEN NEW.table_namespace IS DISTINCT FROM OLD.table_namespace
              OR NEW.table_name IS DISTINCT FROM OLD.table_name THEN 'rename'
            WHEN NEW.metadata_location IS DISTINCT FROM OLD.metadata_location THEN 'commit'
        END;
        IF v_kind IS NULL THEN
            RETURN NULL;  -- nothing a reader sees changed
        END IF;
    END IF;
    IF coalesce(upper(v_row.iceberg_type), 'TABLE') <> 'TABLE' THEN
        RETURN NULL;  -- a view's definition: no rows
    END IF;
    PERFORM pg_advisory_xact_lock(104212027277314);
    v_seq := nextval('sketch.commit_seq');
    INSERT INTO sketch.catalog_commits (
        seq, catalog_name, table_namespace, table_name, kind, metadata_location,
        previous_metadata_location, previous_namespace, previous_name
    ) VALUES (
        v_seq, v_row.catalog_name, v_row.table_namespace, v_row.table_name, v_kind,
        CASE WHEN TG_OP = 'DELETE' THEN NULL ELSE NEW.metadata_location END,
        CASE WHEN TG_OP = 'INSERT' THEN NULL ELSE OLD.metadata_location END,
        CASE WHEN v_kind = 'rename' THEN OLD.table_namespace END,
        CASE WHEN v_kind = 'rename' THEN OLD.table_name END
    );
    -- The writer in this transaction (the table service) reads its number from here.
    PERFORM set_config('sketch.commit_seq', v_seq::text, true);
    RETURN NULL;
END;
$$;

CREATE TRIGGER number_catalog_commits
    AFTER INSERT OR UPDATE OR DELETE ON iceberg_tables
    FOR EACH ROW EXECUTE FUNCTION sketch.number_catalog_commit();

-- Commits read from their metadata: Spark's compactions (rewrite_data_files) replace files
-- without changing rows.
ALTER TABLE sketch.table_commits DROP CONSTRAINT table_commits_operation_check;
ALTER TABLE sketch.table_commits ADD CONSTRAINT table_commits_operation_check
    CHECK (operation IN ('create', 'append', 'delete', 'overwrite', 'replace', 'drop'));
