-- A materialised recursive view: the sketch whose view keeps its rows, and the Iceberg table
-- they are written to with every version the sketch publishes (svc.materialize).
CREATE TABLE sketch.materialized_views (
    sketch_id   bigint PRIMARY KEY REFERENCES sketch.sketches (sketch_id) ON DELETE CASCADE,
    table_name  text NOT NULL UNIQUE
);
