-- A query's decision to apply a valid sketch ('use') is recorded beside the decisions not to
-- ('skip'), so `status` shows why a report runs with its sketch or without it.
ALTER TABLE sketch.cost_decisions DROP CONSTRAINT cost_decisions_action_check;
ALTER TABLE sketch.cost_decisions ADD CONSTRAINT cost_decisions_action_check
    CHECK (action IN ('incremental', 'full', 'skip', 'use'));
