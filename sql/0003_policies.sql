-- Maintenance policies (issue 5): when intermittent maintenance brings a sketch up to date.
-- A policy is a set of conditions (accumulated delta rows, elapsed time, a named report about to
-- run) combined with any/all; checking one is a query over these tables and the commit log.
CREATE TABLE sketch.sketch_policies (
    sketch_id        bigint PRIMARY KEY REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    policy           jsonb NOT NULL,
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Every policy check that changed its outcome, and every one that fired: the status page shows
-- the newest with its reason.
CREATE TABLE sketch.policy_decisions (
    decision_id   bigserial PRIMARY KEY,
    sketch_id     bigint NOT NULL REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    fired         boolean NOT NULL,
    reason        text NOT NULL,
    policy        jsonb NOT NULL,
    decided_at    timestamptz NOT NULL
);
CREATE INDEX policy_decisions_by_sketch ON sketch.policy_decisions (sketch_id, decision_id DESC);

-- A report announces that it is about to run (the refresh before it, or a schedule ahead of
-- it); policies that name it fire once for the announcement.
CREATE TABLE sketch.report_announcements (
    announcement_id  bigserial PRIMARY KEY,
    report           text NOT NULL CHECK (length(report) BETWEEN 1 AND 200),
    due_at           timestamptz NOT NULL,
    announced_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX report_announcements_by_report ON sketch.report_announcements (report, due_at DESC);
