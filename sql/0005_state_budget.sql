-- State memory budget (issue 6): the mode the budget allocation chose for each sketch's
-- operator state (kept in full, cut to its top m values, or none kept: maintenance
-- recaptures), with the sizes it was chosen on and why. One row per sketch: the current choice.
CREATE TABLE sketch.state_modes (
    sketch_id    bigint PRIMARY KEY REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    mode         text NOT NULL CHECK (mode IN ('full', 'top_m', 'none')),
    keep_top     integer CHECK (keep_top >= 1),
    -- The state's size as last measured, in full and cut to the top m (NULL: nothing to cut).
    full_bytes   bigint NOT NULL CHECK (full_bytes >= 0),
    top_m_bytes  bigint CHECK (top_m_bytes >= 0),
    reason       text NOT NULL,
    decided_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
