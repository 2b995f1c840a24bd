-- Sketches remember the template they were captured for (the query with its :name placeholders
-- unbound) and the partition used for each table, so that a query can find the sketches of its
-- template and check whether one of them can be reused for its parameter binding (PBDS Sec. 7).
ALTER TABLE sketch.sketches
    ADD COLUMN template_key   text,
    ADD COLUMN partition_ids  jsonb NOT NULL DEFAULT '{}'::jsonb;
CREATE INDEX sketches_by_template ON sketch.sketches (template_key);

-- Self-tuning (PBDS Sec. 8): how often queries of a template ran without a usable sketch.
CREATE TABLE sketch.template_stats (
    template_key  text PRIMARY KEY,
    query_sql     text NOT NULL,
    misses        integer NOT NULL DEFAULT 0 CHECK (misses >= 0),
    hits          integer NOT NULL DEFAULT 0 CHECK (hits >= 0),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
