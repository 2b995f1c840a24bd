-- Incremental maintenance (issue 4): the data files each commit added and removed, recorded by
-- the writer (see sketch_core/tables/file_changes.py). A reader derives a new snapshot's files
-- from its parent's with them instead of reading the commit's Iceberg manifests. NULL: not
-- recorded (a commit made before this migration, or one touching too many files); readers then
-- read the manifests.
ALTER TABLE sketch.table_commits ADD COLUMN files jsonb;
