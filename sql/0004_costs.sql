-- Cost model (issue 6): every capture, maintenance and query records its timing and the sizes
-- that drive it, and the linear cost models are fitted from these rows.

-- The rows of the sketch's tables at the snapshot a capture or maintenance run produced.
ALTER TABLE sketch.maintenance_runs ADD COLUMN table_rows bigint;

-- Every query run through the service: with a sketch (its version) or without one.
CREATE TABLE sketch.query_runs (
    run_id          bigserial PRIMARY KEY,
    template_key    text NOT NULL,
    sketch_id       bigint REFERENCES sketch.sketches (sketch_id) ON DELETE SET NULL,
    sketch_version  integer,
    table_rows      bigint NOT NULL CHECK (table_rows >= 0),
    files_read      integer NOT NULL CHECK (files_read >= 0),
    files_total     integer NOT NULL CHECK (files_total >= 0),
    seconds         double precision NOT NULL CHECK (seconds >= 0),
    ran_at          timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX query_runs_by_template ON sketch.query_runs (template_key, run_id DESC);
CREATE INDEX query_runs_by_sketch ON sketch.query_runs (sketch_id, run_id DESC);

-- Every choice the cost model made (maintain incrementally, recapture, or run a query without
-- the sketch), with its estimates and reason: the status page and the CLI show the newest.
CREATE TABLE sketch.cost_decisions (
    decision_id  bigserial PRIMARY KEY,
    sketch_id    bigint NOT NULL REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    context      text NOT NULL CHECK (context IN ('maintain', 'query', 'refresh')),
    action       text NOT NULL CHECK (action IN ('incremental', 'full', 'skip')),
    reason       text NOT NULL,
    estimates    jsonb NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX cost_decisions_by_sketch ON sketch.cost_decisions (sketch_id, decision_id DESC);
