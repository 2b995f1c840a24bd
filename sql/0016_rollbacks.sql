-- A table's current snapshot can become one it had before: Spark's rollback_to_snapshot,
-- rollback_to_timestamp and set_current_snapshot procedures move the table back without a new
-- snapshot. Such a commit is a row of its own (its own sequence number, its rows the difference
-- between the two snapshots' files) naming an earlier snapshot id, so a table's snapshot ids
-- are no longer unique among its commits. Lookups go by sequence; this index serves none.
ALTER TABLE sketch.table_commits DROP CONSTRAINT table_commits_table_id_snapshot_id_key;
