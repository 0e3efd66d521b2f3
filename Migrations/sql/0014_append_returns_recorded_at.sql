-- ledger.append answers with when each event was recorded.
--
-- A writer that has just appended knows what it appended, where, and at which versions, but not
-- the recorded_at the function gave the events, so the state it held after its append was not
-- the fold of the log and could not be kept: the next command read its own events back. With
-- recorded_at in the answer (the new events' one instant, and each duplicate's own) a writer's
-- state after an append is exactly what folding the log gives, and is kept as such.
--
-- The function is the one of 0011 but for the added column. A function's result type cannot be
-- changed in place, so it is dropped and created again in this migration's transaction (no append
-- can run between the two); SECURITY DEFINER, the search_path and the grants are stated again.

DROP FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean);

CREATE FUNCTION ledger.append(
    p_stream_id text,
    p_expected bigint,
    p_event_ids uuid[],
    p_event_types text[],
    p_data text[],
    p_metadata text[],
    p_dedup_keys text[],
    p_check_duplicates boolean DEFAULT false
) RETURNS TABLE (
    event_id uuid, "position" bigint, stream_id text, stream_version bigint, duplicate boolean, dedup_key text,
    recorded_at timestamptz
)
LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
#variable_conflict use_column
DECLARE
    v_ids        uuid[]  := p_event_ids;
    v_types      text[]  := p_event_types;
    v_datas      jsonb[];
    v_metas      jsonb[];
    v_keys       text[]  := p_dedup_keys;
    v_count      int     := coalesce(cardinality(p_event_ids), 0);
    v_dup_keys   text[];
    v_version    bigint;
    v_hash       bytea;
    v_hashes     bytea[];
    v_contents   bytea[];
    v_content    bytea;
    v_xid        xid8;
    v_first      bigint;
    v_now        timestamptz;
    v_foreign    jsonb;
BEGIN
    IF v_count = 0 THEN
        RETURN;
    END IF;
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RAISE EXCEPTION 'ledger.append must be the first write of its transaction'
            USING ERRCODE = 'LW002',
                  HINT = 'Append first, then write anything else in the same transaction; append once per transaction.';
    END IF;

    IF p_check_duplicates THEN
        SELECT coalesce(array_agg(e.dedup_key), '{}') INTO v_dup_keys
        FROM ledger.events e WHERE e.dedup_key = ANY (p_dedup_keys);
        IF cardinality(v_dup_keys) > 0 THEN
            -- A key belongs to the stream that recorded it first: held by another stream, it
            -- refuses the whole append (nothing of it is recorded), naming where it is held.
            SELECT jsonb_agg(jsonb_build_object('key', e.dedup_key, 'position', e.position,
                                                'streamId', e.stream_id, 'streamVersion', e.stream_version,
                                                'eventId', e.event_id) ORDER BY e.position)
              INTO v_foreign
            FROM ledger.events e WHERE e.dedup_key = ANY (v_dup_keys) AND e.stream_id <> p_stream_id;
            IF v_foreign IS NOT NULL THEN
                RAISE EXCEPTION 'stream %: % of the deduplication keys appended are recorded in another stream; nothing was appended',
                    p_stream_id, jsonb_array_length(v_foreign)
                    USING ERRCODE = 'LW007', DETAIL = v_foreign::text,
                          HINT = 'A deduplication key belongs to the stream that recorded it first.';
            END IF;
            RETURN QUERY
                SELECT e.event_id, e.position, e.stream_id, e.stream_version, true, e.dedup_key, e.recorded_at
                FROM ledger.events e WHERE e.dedup_key = ANY (v_dup_keys);
            -- Keep the new ones; the same key twice in one batch is recorded once.
            SELECT coalesce(array_agg(u.id ORDER BY u.i), '{}'), coalesce(array_agg(u.type ORDER BY u.i), '{}'),
                   coalesce(array_agg(u.data ORDER BY u.i), '{}'), coalesce(array_agg(u.meta ORDER BY u.i), '{}'),
                   coalesce(array_agg(u.key ORDER BY u.i), '{}')
              INTO v_ids, v_types, p_data, p_metadata, v_keys
            FROM unnest(p_event_ids, p_event_types, p_data, p_metadata, p_dedup_keys) WITH ORDINALITY
                 AS u(id, type, data, meta, key, i)
            WHERE u.key IS NULL
               OR (NOT u.key = ANY (v_dup_keys) AND array_position(p_dedup_keys, u.key) = u.i);
            v_count := cardinality(v_ids);
            IF v_count = 0 THEN
                RETURN;
            END IF;
        END IF;
    END IF;

    -- One writer per stream at a time, until commit: the head read below is then the
    -- real head, `any` never races, and a stale expected version is a clean LW001.
    -- (Advisory locks take no transaction id, so the critical section below still
    -- assigns it.)
    PERFORM pg_advisory_xact_lock(hashtextextended(p_stream_id, 7400119));

    SELECT e.stream_version, e.hash INTO v_version, v_hash
    FROM ledger.events e WHERE e.stream_id = p_stream_id
    ORDER BY e.stream_version DESC LIMIT 1;
    v_version := coalesce(v_version, 0);
    v_hash := coalesce(v_hash, '\x'::bytea);
    IF p_expected IS NOT NULL AND p_expected <> v_version THEN
        RAISE EXCEPTION 'stream % is at version %, expected %', p_stream_id, v_version, p_expected
            USING ERRCODE = 'LW001', DETAIL = v_version::text;
    END IF;

    v_datas := p_data::jsonb[];
    v_metas := p_metadata::jsonb[];

    -- Critical section: the transaction id and the positions are taken together,
    -- so position order is transaction-id order (see the top of this file).
    -- A session lock keeps it shorter than the commit. It is taken and released inside
    -- the block whose handler releases it, so no cancellation, timeout or error can
    -- leave it held: in 0001 it was taken before the block, and a cancellation arriving
    -- between the two left every later append of the database waiting on it.
    BEGIN
        PERFORM pg_advisory_lock(7400118);
        v_xid := pg_current_xact_id();
        v_first := nextval('ledger.events_position_seq');
        IF v_count > 1 THEN
            PERFORM setval('ledger.events_position_seq', v_first + v_count - 1);
        END IF;
        PERFORM pg_advisory_unlock(7400118);
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        -- Released if this session holds it (not when the wait for it was what got cancelled).
        IF EXISTS (SELECT 1 FROM pg_locks
                   WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
                     AND classid = 0 AND objid = 7400118 AND objsubid = 1) THEN
            PERFORM pg_advisory_unlock(7400118);
        END IF;
        RAISE;
    END;

    v_now := clock_timestamp();
    -- Contents set-based, then only the chain itself in a loop: subscripting large
    -- arrays element by element in PL/pgSQL costs more than the hashing.
    SELECT array_agg(ledger.event_content(v_first + u.i - 1, p_stream_id, v_version + u.i, u.id, u.type,
                                          u.data, u.meta, v_now, u.key) ORDER BY u.i)
      INTO v_contents
    FROM unnest(v_ids, v_types, v_datas, v_metas, v_keys) WITH ORDINALITY AS u(id, type, data, meta, key, i);
    v_hashes := '{}';
    FOREACH v_content IN ARRAY v_contents LOOP
        v_hash := sha256(v_hash || v_content);
        v_hashes := array_append(v_hashes, v_hash);
    END LOOP;

    INSERT INTO ledger.events
        (position, stream_id, stream_version, event_id, event_type, data, metadata,
         recorded_at, dedup_key, transaction_id, hash)
    SELECT v_first + u.i - 1, p_stream_id, v_version + u.i, u.id, u.type, u.data, u.meta,
           v_now, u.key, v_xid, u.hash
    FROM unnest(v_ids, v_types, v_datas, v_metas, v_keys, v_hashes) WITH ORDINALITY
         AS u(id, type, data, meta, key, hash, i);

    -- The new events took consecutive positions and versions in the order given, and one instant:
    -- one row (event_id NULL) says where the run starts and when it was recorded.
    RETURN QUERY SELECT NULL::uuid, v_first, p_stream_id, v_version + 1, false, NULL::text, v_now;
END
$$;

REVOKE ALL ON FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) TO ledger_runtime;
