-- Starting a maintenance run in one round trip (issue 43): take the sketch's work lock (see
-- sketch_core/metastore/work_locks.py) and, once it is held, read the sketch's definition and
-- newest version with its fragment bitmaps. A warm incremental run takes ~15 ms, of which each
-- round trip with its client-side work is ~0.5-1 ms. The read is a statement of its own, after
-- the lock is taken: in READ COMMITTED it takes a new snapshot, so it sees every version the
-- previous holder published before letting go. Always one row: ``locked`` false when another
-- session holds the lock (nothing read), ``found`` false when there is no such sketch.
CREATE FUNCTION sketch.lock_and_read_sketch(p_lock_class integer, p_name text)
RETURNS TABLE (
    locked boolean,
    found boolean,
    name text,
    query_sql text,
    params jsonb,
    template_key text,
    partition_ids jsonb,
    version integer,
    seq bigint,
    table_snapshots jsonb,
    state_ref text,
    partition_ids_of bigint[],
    bitmaps_of bytea[]
)
LANGUAGE plpgsql VOLATILE AS $$
#variable_conflict use_column
BEGIN
    IF NOT pg_try_advisory_lock(p_lock_class, hashtext(p_name)) THEN
        RETURN QUERY SELECT false, false, p_name, NULL::text, NULL::jsonb, NULL::text, NULL::jsonb,
            NULL::integer, NULL::bigint, NULL::jsonb, NULL::text, NULL::bigint[], NULL::bytea[];
        RETURN;
    END IF;
    RETURN QUERY
    SELECT true, s.sketch_id IS NOT NULL, p_name, s.query_sql, s.params, s.template_key,
           s.partition_ids, n.version, n.seq, n.table_snapshots, n.state_ref,
           (SELECT array_agg(f.partition_id ORDER BY f.partition_id) FROM sketch.sketch_fragments f
             WHERE f.sketch_id = s.sketch_id AND f.version = n.version),
           (SELECT array_agg(f.bitmap ORDER BY f.partition_id) FROM sketch.sketch_fragments f
             WHERE f.sketch_id = s.sketch_id AND f.version = n.version)
      FROM (SELECT 1) AS one
      LEFT JOIN sketch.sketches s ON s.name = p_name
      LEFT JOIN LATERAL (
          SELECT v.version, v.seq, v.table_snapshots, v.state_ref FROM sketch.sketch_versions v
           WHERE v.sketch_id = s.sketch_id ORDER BY v.version DESC LIMIT 1
      ) n ON true;
END;
$$;
