-- Cost model (issue 6): an incremental run that started from a version without stored state
-- first computed the operator state on Spark. Its seconds are mostly that build, once, so the
-- incremental model is fitted without such runs.
ALTER TABLE sketch.maintenance_runs ADD COLUMN built_state boolean NOT NULL DEFAULT false;
