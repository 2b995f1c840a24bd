-- Cost model (issue 6): the first run of a report in a process after runs of it the other way
-- (with a sketch after runs without one, or the reverse) pays for warming up that way: on the
-- workload benchmark such runs took ~0.55 s where the same plain query took ~0.3 s from its second
-- run on. The query models are fitted without such runs, as the incremental model is without the
-- runs that first built their state (0006).
ALTER TABLE sketch.query_runs ADD COLUMN warm_up boolean NOT NULL DEFAULT false;
