-- A rename (Spark's ALTER TABLE ... RENAME TO, PyIceberg's rename_table) is one catalog change:
-- the old name's history ends and the new name's begins. It was numbered once, as a 'rename' that
-- ingest records as the old name's drop, so the new name stayed unknown until its next commit.
-- It now draws a second number under the same lock: a 'create' of the new name pointing at the
-- table's metadata, which ingest registers as it registers a table another engine created (its
-- snapshots' rows as its first commit). Renames numbered before this migration keep their one row.

CREATE OR REPLACE FUNCTION sketch.number_catalog_commit() RETURNS trigger
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
    IF v_kind = 'rename' THEN
        v_seq := nextval('sketch.commit_seq');
        INSERT INTO sketch.catalog_commits (
            seq, catalog_name, table_namespace, table_name, kind, metadata_location
        ) VALUES (
            v_seq, NEW.catalog_name, NEW.table_namespace, NEW.table_name, 'create', NEW.metadata_location
        );
    END IF;
    -- The writer in this transaction (the table service) reads its number from here.
    PERFORM set_config('sketch.commit_seq', v_seq::text, true);
    RETURN NULL;
END;
$$;
