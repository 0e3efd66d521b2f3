-- What the app's own servers follow: every change of a user's standing, per app, in log order
-- (`GET /v1/apps/{bundleId}/changes`), and the signed webhooks that carry the same changes.
--
-- The server that leads the projections writes `changes` alone, following the log through the
-- gap-safe reader, and moves `change_writer.position` in the same transaction as the rows it
-- wrote: a reader that reads the position first and the rows up to it after never misses a row.
-- One log position may give several changes (a renewal and the entitlement it restores; the
-- expiries a clock event found due), told apart by `seq`; a page of the feed never splits them.
CREATE TABLE ledger.changes (
    app          text        NOT NULL,
    position     bigint      NOT NULL CHECK (position >= 1),
    seq          integer     NOT NULL CHECK (seq >= 0),
    user_id      text        NOT NULL,
    type         text        NOT NULL CHECK (type ~ '^[a-z][a-z_]*$'),
    occurred_at  timestamptz NOT NULL,
    recorded_at  timestamptz NOT NULL,
    -- The change as the feed and the webhooks send it (JSON, keys sorted).
    body         text        NOT NULL,
    PRIMARY KEY (app, position, seq)
);

COMMENT ON TABLE ledger.changes IS 'Per app, every change of a user''s standing in log order: the change feed and the webhooks'' source.';
COMMENT ON COLUMN ledger.changes.occurred_at IS 'When it took effect: the fact''s recording, or for an expiry the instant it ended.';

-- How far the writer has followed the log (one row), and with which version of its rules.
CREATE TABLE ledger.change_writer (
    id          boolean     PRIMARY KEY DEFAULT true CHECK (id),
    position    bigint      NOT NULL DEFAULT 0 CHECK (position >= 0),
    version     integer     NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now()
);

-- For each user with something that will end or start by time alone (a subscription's period,
-- a billing grace period), the earliest such instant after the last change written: the clock
-- appends `ClockPassed` to the app's `clock/` stream once one is due, and the writer turns it into
-- the changes at the position of that event.
CREATE TABLE ledger.change_deadlines (
    app      text        NOT NULL,
    user_id  text        NOT NULL,
    due_at   timestamptz NOT NULL,
    PRIMARY KEY (app, user_id)
);
CREATE INDEX change_deadlines_due ON ledger.change_deadlines (due_at, app);

GRANT SELECT ON ledger.changes, ledger.change_writer, ledger.change_deadlines TO ledger_runtime;
GRANT INSERT, UPDATE, DELETE ON ledger.changes, ledger.change_writer, ledger.change_deadlines TO ledger_runtime;

-- Where each app's changes are POSTed: an operator registers the URL (`ledger webhooks add`), and
-- the ledger signs every delivery with the endpoint's secret (sealed, as the apps' secrets are).
-- `position`: every change up to it has been queued for the endpoint (in `webhook_deliveries`).
CREATE TABLE ledger.webhook_endpoints (
    id             text        PRIMARY KEY CHECK (id ~ '^wh_[0-9a-f]{16}$'),
    app            text        NOT NULL REFERENCES ledger.apps (bundle_id),
    url            text        NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    -- The change types sent; NULL: all of them.
    types          text[],
    secret_sealed  bytea       NOT NULL,
    sealed_with    text        NOT NULL,
    position       bigint      NOT NULL CHECK (position >= 0),
    created_at     timestamptz NOT NULL DEFAULT now(),
    removed_at     timestamptz
);
CREATE INDEX webhook_endpoints_app ON ledger.webhook_endpoints (app) WHERE removed_at IS NULL;

-- One row per (endpoint, change): pending until the endpoint answers 2xx (delivered) or the
-- retries end (parked). A parked delivery, or all after a position, can be sent again.
-- Per user, a delivery is sent only once every earlier pending one of the same user and endpoint
-- is delivered or parked (`webhook_deliveries_user` finds the earliest).
CREATE TABLE ledger.webhook_deliveries (
    endpoint_id      text        NOT NULL REFERENCES ledger.webhook_endpoints (id),
    position         bigint      NOT NULL,
    seq              integer     NOT NULL,
    user_id          text        NOT NULL,
    type             text        NOT NULL,
    status           text        NOT NULL CHECK (status IN ('pending', 'delivered', 'parked')),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- The attempts made before the current round of retries (0, or as many as at the last resend):
    -- the retry schedule starts again at each resend, while attempt numbers go on.
    round_start      integer     NOT NULL DEFAULT 0 CHECK (round_start >= 0 AND round_start <= attempts),
    next_attempt_at  timestamptz NOT NULL,
    queued_at        timestamptz NOT NULL DEFAULT now(),
    delivered_at     timestamptz,
    PRIMARY KEY (endpoint_id, position, seq)
);
CREATE INDEX webhook_deliveries_due ON ledger.webhook_deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_user ON ledger.webhook_deliveries (endpoint_id, user_id, position, seq) WHERE status = 'pending';

-- Every attempt and what the endpoint answered (or why there was no answer).
CREATE TABLE ledger.webhook_attempts (
    endpoint_id  text        NOT NULL,
    position     bigint      NOT NULL,
    seq          integer     NOT NULL,
    attempt      integer     NOT NULL CHECK (attempt >= 1),
    at           timestamptz NOT NULL,
    duration_ms  integer     NOT NULL,
    status_code  integer,
    error        text,
    response     text,
    PRIMARY KEY (endpoint_id, position, seq, attempt),
    FOREIGN KEY (endpoint_id, position, seq) REFERENCES ledger.webhook_deliveries (endpoint_id, position, seq)
);

COMMENT ON TABLE ledger.webhook_attempts IS 'Each POST of a change to a webhook endpoint: its HTTP status, or the error, and the start of the answer.';

GRANT SELECT, INSERT, UPDATE ON ledger.webhook_endpoints, ledger.webhook_deliveries TO ledger_runtime;
GRANT SELECT, INSERT ON ledger.webhook_attempts TO ledger_runtime;
