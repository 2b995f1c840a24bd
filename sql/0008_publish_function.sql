-- Publishing a sketch version (issue 4): one round trip instead of seven. The steps are those
-- SketchRepository.publish_version ran one statement at a time: lock the sketch's row (which
-- serializes its publishers), return the version already published for the sequence if there
-- is one, else insert the next version and its fragment bitmaps; and record the run that
-- produced it, if given. In READ COMMITTED each statement of a PL/pgSQL function takes a new
-- snapshot, so the version numbers read after the lock include every earlier publisher's.
CREATE FUNCTION sketch.publish_version(
    p_name text,
    p_seq bigint,
    p_table_snapshots jsonb,
    p_state_ref text,
    p_partition_ids bigint[],
    p_bitmaps bytea[],
    p_run jsonb
) RETURNS TABLE (published_version integer, existed boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_sketch_id bigint;
    v_existing integer;
    v_version integer;
BEGIN
    SELECT s.sketch_id INTO v_sketch_id FROM sketch.sketches s WHERE s.name = p_name FOR UPDATE;
    IF v_sketch_id IS NULL THEN
        RAISE EXCEPTION 'sketch % does not exist', p_name USING ERRCODE = 'no_data_found';
    END IF;
    SELECT v.version INTO v_existing
      FROM sketch.sketch_versions v WHERE v.sketch_id = v_sketch_id AND v.seq = p_seq;
    IF v_existing IS NULL THEN
        SELECT coalesce(max(v.version), 0) + 1 INTO v_version
          FROM sketch.sketch_versions v WHERE v.sketch_id = v_sketch_id;
        INSERT INTO sketch.sketch_versions (sketch_id, version, seq, table_snapshots, state_ref, created_at)
        VALUES (v_sketch_id, v_version, p_seq, p_table_snapshots, p_state_ref, now());
        INSERT INTO sketch.sketch_fragments (sketch_id, version, partition_id, bitmap)
        SELECT v_sketch_id, v_version, f.partition_id, f.bitmap
          FROM unnest(p_partition_ids, p_bitmaps) AS f (partition_id, bitmap);
    ELSE
        v_version := v_existing;
    END IF;
    IF p_run IS NOT NULL THEN
        INSERT INTO sketch.maintenance_runs (
            sketch_id, strategy, status, from_version, to_version, delta_rows, seconds, error,
            table_rows, built_state, started_at, finished_at
        ) VALUES (
            v_sketch_id,
            p_run ->> 'strategy',
            p_run ->> 'status',
            (p_run ->> 'from_version')::integer,
            v_version,
            (p_run ->> 'delta_rows')::bigint,
            (p_run ->> 'seconds')::double precision,
            p_run ->> 'error',
            (p_run ->> 'table_rows')::bigint,
            coalesce((p_run ->> 'built_state')::boolean, false),
            now() - make_interval(secs => (p_run ->> 'seconds')::double precision),
            now()
        );
    END IF;
    RETURN QUERY SELECT v_version, v_existing IS NOT NULL;
END;
$$;
