-- Cost-based attribute choice (issue 7).
--
-- Stratified samples, one per (table, group-by columns, rate): drawn on Spark from one table
-- snapshot and stored as a Parquet file under the warehouse. Redrawn (the row replaced) once
-- the rows inserted and deleted since add up to more than a set share of the table.
CREATE TABLE sketch.samples (
    sample_id      bigserial PRIMARY KEY,
    table_id       bigint NOT NULL REFERENCES sketch.tables (table_id),
    group_columns  text[] NOT NULL,  -- empty: one stratum (a uniform sample)
    rate           double precision NOT NULL CHECK (rate > 0 AND rate <= 1),
    drawn_at_seq   bigint NOT NULL,
    table_rows     bigint NOT NULL CHECK (table_rows >= 0),
    sample_rows    bigint NOT NULL CHECK (sample_rows >= 0),
    strata         bigint NOT NULL CHECK (strata >= 0),
    path           text NOT NULL,
    drawn_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (table_id, group_columns, rate)
);

-- How a sketch's attributes were chosen: the strategy, the estimates it ranked candidates by
-- (JSON, per table), and once captured the true selectivity of the chosen attributes with the
-- relative size error of their estimates. One row per sketch: its latest capture.
CREATE TABLE sketch.attribute_choices (
    sketch_id   bigint PRIMARY KEY REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    strategy    text NOT NULL,
    estimates   jsonb NOT NULL,
    outcome     jsonb,
    decided_at  timestamptz NOT NULL DEFAULT clock_timestamp()
);
