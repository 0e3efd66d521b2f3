-- The write path, leaner (issue 36): the same guarantees in fewer statements per append.
--
-- Measured with perf on PostgreSQL 15 (docs/benchmarks.md, "Where an append's time goes"), an
-- append of one event cost about three plain INSERTs, spread thin: every INSERT statement plans
-- again each CHECK constraint of the table (ExecRelCheck parses and plans `ccbin` anew for each
-- statement) and each partial expression index's predicate and expressions, and every PERFORM and
-- RETURN QUERY of the function starts a whole query. So:
--
-- 1. The CHECK constraints of ledger.events are checked by ledger.append, the table's only writer
--    (the runtime role cannot insert), once per call on its arguments. Versions and hashes are the
--    function's own; stream ids, event types and keys are checked as before, with the same
--    SQLSTATE (23514) and a message that says what was wrong.
-- 2. Two indexes no statement reads are dropped (events_app_account_token: notifications find
--    their user through the token's binding key; events_unmapped_notification_tokens: the waiting
--    notifications are matched on lower(token), which it did not index). Two others, for rare
--    reads, become rows of their own, written by ledger.append only for the events they are
--    about: ledger.notification_stream_keys and ledger.consumption_request_events, filled here
--    from the log. events_product stays (one index; nearly every user event names a product).
-- 3. ledger.append takes its locks in simple expressions, writes one event with one INSERT of
--    variables, and answers with RETURN NEXT: for one event, two queries (the head read and the
--    INSERT) instead of seven. Nothing else changes: the expected version, the exactly-once keys
--    and their owner, the gap guard's critical section, the hash chain (ledger.event_content is
--    unchanged) and the result.

ALTER TABLE ledger.events
    DROP CONSTRAINT events_stream_version_positive,
    DROP CONSTRAINT events_stream_id_printable,
    DROP CONSTRAINT events_dedup_key_printable,
    DROP CONSTRAINT events_event_type_versioned,
    DROP CONSTRAINT events_hash_is_sha256;

DROP INDEX ledger.events_app_account_token;
DROP INDEX ledger.events_unmapped_notification_tokens;
DROP INDEX ledger.events_unmapped_notifications;
DROP INDEX ledger.events_consumption_requests;

-- Each event of a `notifications/<bundle id>` stream under each key it can be found by:
-- 'original:<original transaction id>' and 'token:<appAccountToken, lower case>'.
CREATE TABLE ledger.notification_stream_keys (
    stream_id  text   NOT NULL,
    key        text   NOT NULL,
    "position" bigint NOT NULL,
    PRIMARY KEY (stream_id, key, "position")
);

-- The CONSUMPTION_REQUEST notifications recorded, on any stream.
CREATE TABLE ledger.consumption_request_events (
    "position"  bigint      PRIMARY KEY,
    stream_id   text        NOT NULL,
    recorded_at timestamptz NOT NULL
);
CREATE INDEX consumption_request_events_recorded ON ledger.consumption_request_events (recorded_at);

INSERT INTO ledger.notification_stream_keys (stream_id, key, "position")
SELECT e.stream_id, k.key, e."position"
FROM ledger.events e
CROSS JOIN LATERAL (VALUES
    ('original:' || COALESCE(e.data -> 'transaction' ->> 'originalTransactionId', e.data -> 'renewalInfo' ->> 'originalTransactionId')),
    ('token:' || lower(e.data -> 'transaction' ->> 'appAccountToken'))) AS k(key)
WHERE starts_with(e.stream_id, 'notifications/') AND k.key IS NOT NULL;

INSERT INTO ledger.consumption_request_events ("position", stream_id, recorded_at)
SELECT e."position", e.stream_id, e.recorded_at FROM ledger.events e
WHERE e.event_type = 'AppStoreNotificationReceived.v1' AND e.data ->> 'notificationType' = 'CONSUMPTION_REQUEST';

-- Like the log they index: written only by ledger.append, never changed.
CREATE FUNCTION ledger.refuse_lookup_change() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % is refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'LW003',
              HINT = 'Its rows are written by ledger.append with the events they find, and kept as long as the log.';
END
$$;
CREATE TRIGGER notification_stream_keys_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.notification_stream_keys
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_lookup_change();
CREATE TRIGGER notification_stream_keys_refuse_truncate BEFORE TRUNCATE ON ledger.notification_stream_keys
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_lookup_change();
CREATE TRIGGER consumption_request_events_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.consumption_request_events
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_lookup_change();
CREATE TRIGGER consumption_request_events_refuse_truncate BEFORE TRUNCATE ON ledger.consumption_request_events
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_lookup_change();
REVOKE ALL ON ledger.notification_stream_keys, ledger.consumption_request_events FROM PUBLIC;
GRANT SELECT ON ledger.notification_stream_keys, ledger.consumption_request_events TO ledger_runtime;

CREATE OR REPLACE FUNCTION ledger.append(
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
    -- What the table's CHECK constraints checked until 0027, checked once per call on the arguments.
    IF p_stream_id = '' OR p_stream_id ~ '[[:cntrl:][:space:]]' THEN
        RAISE EXCEPTION 'stream id % is empty or holds a space or control character', to_json(p_stream_id)::text USING ERRCODE = 'check_violation';
    END IF;
    IF array_to_string(p_event_types, ' ', '-') !~ '^[A-Za-z][A-Za-z0-9]*\.v[0-9]+( [A-Za-z][A-Za-z0-9]*\.v[0-9]+)*$' THEN
        RAISE EXCEPTION 'event types must be a name and a version, such as PurchaseRecorded.v1 (got %)', array_to_json(p_event_types)::text
            USING ERRCODE = 'check_violation';
    END IF;
    IF '' = ANY (p_dedup_keys) OR array_to_string(p_dedup_keys, '') ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'deduplication keys must not be empty or hold control characters (got %)', array_to_json(p_dedup_keys)::text
            USING ERRCODE = 'check_violation';
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

    -- One writer per stream at a time, until commit: the head read below (a statement of its own,
    -- so its snapshot is taken after the lock) is then the real head, `any` never races, and a
    -- stale expected version is a clean LW001. Locks are taken in IF conditions, PL/pgSQL's simple
    -- expressions, rather than PERFORM, which runs a whole query for them.
    IF pg_advisory_xact_lock(hashtextextended(p_stream_id, 7400119)) IS NULL THEN
        NULL;
    END IF;

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

    -- Critical section: the transaction id and the positions are taken together, so position
    -- order is transaction-id order (see 0001). A session lock keeps it shorter than the commit;
    -- the block's handler releases it whatever interrupts the block (see 0011).
    BEGIN
        IF pg_advisory_lock(7400118) IS NULL THEN
            NULL;
        END IF;
        v_xid := pg_current_xact_id();
        v_first := nextval('ledger.events_position_seq');
        IF v_count > 1 THEN
            v_first := setval('ledger.events_position_seq', v_first + v_count - 1) - v_count + 1;
        END IF;
        IF pg_advisory_unlock(7400118) THEN
            NULL;
        END IF;
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
    IF v_count = 1 THEN
        -- One event, the common case: its hash and its row from variables, one statement.
        v_hash := sha256(v_hash || ledger.event_content(v_first, p_stream_id, v_version + 1, v_ids[1], v_types[1],
                                                        v_datas[1], v_metas[1], v_now, v_keys[1]));
        INSERT INTO ledger.events
            (position, stream_id, stream_version, event_id, event_type, data, metadata,
             recorded_at, dedup_key, transaction_id, hash)
        VALUES (v_first, p_stream_id, v_version + 1, v_ids[1], v_types[1], v_datas[1], v_metas[1],
                v_now, v_keys[1], v_xid, v_hash);
    ELSE
        -- Contents set-based, then only the chain itself in a loop: subscripting large arrays
        -- element by element in PL/pgSQL costs more than the hashing.
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
    END IF;

    -- The lookups of rare reads, as rows of their own for the events they are about (they were
    -- partial expression indexes on every event until 0027). The notifications no user held, on
    -- `notifications/<bundle id>`, by original transaction and by appAccountToken:
    IF starts_with(p_stream_id, 'notifications/') THEN
        INSERT INTO ledger.notification_stream_keys (stream_id, key, "position")
        SELECT p_stream_id, k.key, v_first + u.i - 1
        FROM unnest(v_datas) WITH ORDINALITY AS u(data, i)
        CROSS JOIN LATERAL (VALUES
            ('original:' || COALESCE(u.data -> 'transaction' ->> 'originalTransactionId',
                                     u.data -> 'renewalInfo' ->> 'originalTransactionId')),
            ('token:' || lower(u.data -> 'transaction' ->> 'appAccountToken'))) AS k(key)
        WHERE k.key IS NOT NULL;
    END IF;
    -- The CONSUMPTION_REQUESTs, which the leading server answers (a cheap text test first).
    IF strpos(array_to_string(p_data, ' '), 'CONSUMPTION_REQUEST') > 0 THEN
        INSERT INTO ledger.consumption_request_events ("position", stream_id, recorded_at)
        SELECT v_first + u.i - 1, p_stream_id, v_now
        FROM unnest(v_types, v_datas) WITH ORDINALITY AS u(type, data, i)
        WHERE u.type = 'AppStoreNotificationReceived.v1' AND u.data ->> 'notificationType' = 'CONSUMPTION_REQUEST';
    END IF;

    -- The new events took consecutive positions and versions in the order given, and one instant:
    -- one row (event_id NULL) says where the run starts and when it was recorded.
    event_id := NULL; "position" := v_first; stream_id := p_stream_id; stream_version := v_version + 1;
    duplicate := false; dedup_key := NULL; recorded_at := v_now;
    RETURN NEXT;
END
$$;

REVOKE ALL ON FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) TO ledger_runtime;
