-- Apps, their API keys, and the answers remembered for Idempotency-Key retries.
--
-- None of these are facts of the log: they are the ledger's own configuration and a cache of
-- answers, so they are ordinary tables. A key is stored only as the SHA-256 of its secret.

CREATE TABLE ledger.apps (
    bundle_id       text        PRIMARY KEY CHECK (length(bundle_id) BETWEEN 1 AND 255),
    -- The App Store shared secret for auto-renewable receipts; never logged or returned.
    shared_secret   text,
    created_at      timestamptz NOT NULL DEFAULT now()
);

COMMENT ON TABLE ledger.apps IS 'Apps the ledger records purchases for (ledger apps add).';

CREATE TABLE ledger.api_keys (
    -- The public part of the key (lk_<id>_<secret>): names the key in lists and logs.
    key_id          text        PRIMARY KEY,
    app             text        NOT NULL REFERENCES ledger.apps (bundle_id),
    secret_hash     bytea       NOT NULL CHECK (length(secret_hash) = 32),
    scopes          text[]      NOT NULL CHECK (scopes <@ ARRAY['ingest', 'read', 'finance', 'admin'] AND cardinality(scopes) > 0),
    name            text,
    created_at      timestamptz NOT NULL DEFAULT now(),
    revoked_at      timestamptz
);

COMMENT ON TABLE ledger.api_keys IS 'API keys (ledger keys create): one app each, scopes, only the SHA-256 of the secret.';

CREATE TABLE ledger.idempotency_keys (
    app             text        NOT NULL,
    key             text        NOT NULL,
    -- What the request was: method, route and body digest. Another body under the same key is refused.
    request_hash    bytea       NOT NULL,
    -- NULL while the first request runs.
    status          integer,
    response        bytea,
    created_at      timestamptz NOT NULL DEFAULT now(),
    completed_at    timestamptz,
    PRIMARY KEY (app, key)
);

COMMENT ON TABLE ledger.idempotency_keys IS 'First answers to client commands by Idempotency-Key, replayed to retries.';
