-- The event log: one append-only table, written only through ledger.append().
--
-- Ordering guarantee (the gap guard): every transaction that appends takes its
-- transaction id and its positions inside one short critical section, so
-- positions are handed out in transaction-id order. A follower that reads only
-- rows whose transaction_id is below pg_snapshot_xmin(pg_current_snapshot())
-- therefore never sees a later position before an earlier one has committed or
-- rolled back: a held-open transaction delays followers, it never makes them
-- skip, and a rolled-back append leaves a hole nobody waits for.

CREATE SCHEMA IF NOT EXISTS ledger;

CREATE SEQUENCE ledger.events_position_seq AS bigint MINVALUE 1 NO CYCLE;

CREATE TABLE ledger.events (
    position        bigint      NOT NULL,
    stream_id       text        NOT NULL,
    stream_version  bigint      NOT NULL,
    event_id        uuid        NOT NULL,
    event_type      text        NOT NULL,
    data            jsonb       NOT NULL,
    metadata        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    recorded_at     timestamptz NOT NULL,
    dedup_key       text,
    transaction_id  xid8        NOT NULL,
    hash            bytea       NOT NULL,
    CONSTRAINT events_pkey PRIMARY KEY (position),
    CONSTRAINT events_event_id_key UNIQUE (event_id),
    CONSTRAINT events_stream_version_key UNIQUE (stream_id, stream_version),
    CONSTRAINT events_dedup_key_key UNIQUE (dedup_key),
    CONSTRAINT events_stream_version_positive CHECK (stream_version >= 1),
    CONSTRAINT events_stream_id_printable CHECK (stream_id <> '' AND stream_id !~ '[[:cntrl:][:space:]]'),
    CONSTRAINT events_dedup_key_printable CHECK (dedup_key <> '' AND dedup_key !~ '[[:cntrl:]]'),
    CONSTRAINT events_event_type_versioned CHECK (event_type ~ '^[A-Za-z][A-Za-z0-9]*\.v[0-9]+$'),
    CONSTRAINT events_hash_is_sha256 CHECK (octet_length(hash) = 32)
);

ALTER SEQUENCE ledger.events_position_seq OWNED BY ledger.events.position;

COMMENT ON TABLE ledger.events IS
    'Append-only log of every fact the ledger recorded. Never updated or deleted; see README.md.';
COMMENT ON COLUMN ledger.events.position IS 'Global order of the log; gaps are rolled-back appends.';
COMMENT ON COLUMN ledger.events.stream_id IS 'The stream the event belongs to, e.g. user/<app>/<user>.';
COMMENT ON COLUMN ledger.events.stream_version IS 'Version within the stream: 1, 2, 3, ... without gaps.';
COMMENT ON COLUMN ledger.events.event_type IS 'Event name with its schema version, e.g. PurchaseRecorded.v1.';
COMMENT ON COLUMN ledger.events.dedup_key IS 'Idempotency key (e.g. App Store transaction); unique for ever.';
COMMENT ON COLUMN ledger.events.transaction_id IS 'Writing transaction id; followers read only below the snapshot xmin.';
COMMENT ON COLUMN ledger.events.hash IS 'SHA-256 over the previous event''s hash in the stream and this event''s content.';

-- The exact bytes the hash chain covers: the event's fields joined by the unit separator
-- (U+001F), which no field can contain (stream ids, types and keys are checked, JSON escapes
-- control characters). Both append() and `ledger audit verify` use this one definition.
CREATE FUNCTION ledger.event_content(
    p_position bigint, p_stream_id text, p_stream_version bigint, p_event_id uuid,
    p_event_type text, p_data jsonb, p_metadata jsonb, p_recorded_at timestamptz, p_dedup_key text
) RETURNS bytea
LANGUAGE sql STABLE PARALLEL SAFE AS $$
    SELECT convert_to(concat_ws(E'\x1f',
        p_position, p_stream_id, p_stream_version, p_event_id, p_event_type,
        p_data::text, p_metadata::text,
        (extract(epoch FROM p_recorded_at) * 1000000)::bigint,
        coalesce(p_dedup_key, '')
    ), 'UTF8')
$$;

-- Append events to one stream.
--
-- p_expected: NULL = any version, 0 = the stream must not exist yet, n > 0 = the
-- stream must be exactly at version n.
--
-- Result: one row per duplicate (the stored event, duplicate = true) and, when
-- anything was appended, one row with event_id NULL holding the first new position
-- and version; the new events follow on consecutively, in the order given.
--
-- Deduplication: the unique constraint on dedup_key is the authority. The fast path
-- (p_check_duplicates = false) just inserts; a key already recorded makes it fail with
-- unique_violation on events_dedup_key_key, and the caller retries with
-- p_check_duplicates = true. That path returns the stored events of known keys as
-- duplicate = true and appends only the rest; the expected version is then checked
-- only when something new is appended, so a retried command is answered as a
-- duplicate, not as a conflict.
--
-- Errors: SQLSTATE 'LW001' wrong expected version (DETAIL holds the actual version);
-- 'LW002' append was not the first write of its transaction.
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
    event_id uuid, "position" bigint, stream_id text, stream_version bigint, duplicate boolean, dedup_key text
)
LANGUAGE plpgsql VOLATILE AS $$
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
            RETURN QUERY
                SELECT e.event_id, e.position, e.stream_id, e.stream_version, true, e.dedup_key
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
    -- A session lock, released on every path, keeps it shorter than the commit.
    PERFORM pg_advisory_lock(7400118);
    BEGIN
        v_xid := pg_current_xact_id();
        v_first := nextval('ledger.events_position_seq');
        IF v_count > 1 THEN
            PERFORM setval('ledger.events_position_seq', v_first + v_count - 1);
        END IF;
    EXCEPTION WHEN OTHERS OR query_canceled THEN
        PERFORM pg_advisory_unlock(7400118);
        RAISE;
    END;
    PERFORM pg_advisory_unlock(7400118);

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

    -- The new events took consecutive positions and versions in the order given: one row
    -- (event_id NULL) says where the run starts.
    RETURN QUERY SELECT NULL::uuid, v_first, p_stream_id, v_version + 1, false, NULL::text;
END
$$;

-- Immutability, enforced by the database and not only by our code.
CREATE FUNCTION ledger.refuse_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'ledger.events is append-only: % is refused', TG_OP
        USING ERRCODE = 'LW003',
              HINT = 'Record a new event (for example PurchaseRevoked) instead of changing history.';
END
$$;

CREATE TRIGGER events_refuse_update_delete
    BEFORE UPDATE OR DELETE ON ledger.events
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_change();

CREATE TRIGGER events_refuse_truncate
    BEFORE TRUNCATE ON ledger.events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_change();

REVOKE ALL ON ledger.events FROM PUBLIC;
DO $$
BEGIN
    -- The owner keeps SELECT and INSERT only; a superuser is still stopped by the triggers.
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON ledger.events FROM %I', current_user);
END
$$;
