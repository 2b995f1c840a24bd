-- Dropping a table (SketchService.drop_table).
--
-- The table's registration and its commits stay: the commit log is append-only (readers cache
-- what they have seen), and a 'drop' commit ends the table's history with a sequence number of
-- its own. The name is free again once dropped: a table created under it later is a new
-- registration whose history starts at its own create commit.
ALTER TABLE sketch.tables ADD COLUMN dropped_seq bigint;
ALTER TABLE sketch.tables DROP CONSTRAINT tables_name_key;
CREATE UNIQUE INDEX tables_live_name ON sketch.tables (name) WHERE dropped_seq IS NULL;

ALTER TABLE sketch.table_commits DROP CONSTRAINT table_commits_operation_check;
ALTER TABLE sketch.table_commits ADD CONSTRAINT table_commits_operation_check
    CHECK (operation IN ('create', 'append', 'delete', 'overwrite', 'drop'));
