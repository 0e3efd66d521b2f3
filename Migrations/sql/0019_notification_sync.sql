-- How far each app's notifications have been checked against Apple's notification history (App
-- Store Server API), per environment: every notification Apple sent before `synced_through` is in
-- the log (recorded by the webhook, or recovered from the history). The server that leads the
-- projections walks the history from a little before it, so a walk cut short loses nothing; the
-- instant only moves once a whole window was walked.
CREATE TABLE ledger.notification_sync (
    app             text        NOT NULL REFERENCES ledger.apps (bundle_id),
    environment     text        NOT NULL CHECK (environment IN ('production', 'sandbox')),
    synced_through  timestamptz,
    last_run_at     timestamptz NOT NULL,
    last_error      text,
    seen            bigint      NOT NULL DEFAULT 0 CHECK (seen >= 0),
    recovered       bigint      NOT NULL DEFAULT 0 CHECK (recovered >= 0),
    PRIMARY KEY (app, environment)
);

COMMENT ON TABLE ledger.notification_sync IS 'Per app and environment: how far Apple''s notification history has been walked (ledger appstore sync).';
COMMENT ON COLUMN ledger.notification_sync.seen IS 'Notifications the last whole walk saw in Apple''s history.';
COMMENT ON COLUMN ledger.notification_sync.recovered IS 'Of those, the ones the log did not hold, recorded by the walk.';

GRANT SELECT, INSERT, UPDATE ON ledger.notification_sync TO ledger_runtime;

-- Answering Apple's refund questions (CONSUMPTION_REQUEST) with Send Consumption Information: on
-- unless the app switches it off, with the app's refund preference and whether it gave a sample
-- of the content before the purchase (Apple asks both). Set through the owner's function, as the
-- other settings of an app are (migration 0018).
ALTER TABLE ledger.apps
    ADD COLUMN consumption_answers boolean NOT NULL DEFAULT true,
    ADD COLUMN consumption_refund_preference text CHECK (consumption_refund_preference IN ('DECLINE', 'GRANT_FULL', 'GRANT_PRORATED')),
    ADD COLUMN consumption_sample_content boolean NOT NULL DEFAULT false;

CREATE FUNCTION ledger.app_set_consumption_answers(
    p_bundle_id text, p_answering boolean, p_refund_preference text, p_sample_content boolean
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    UPDATE ledger.apps SET consumption_answers = p_answering, consumption_refund_preference = p_refund_preference,
        consumption_sample_content = p_sample_content
    WHERE bundle_id = p_bundle_id;
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION ledger.app_set_consumption_answers(text, boolean, text, boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.app_set_consumption_answers(text, boolean, text, boolean) TO ledger_runtime;

-- The CONSUMPTION_REQUESTs of the last hours, which the leading server answers: found without
-- reading the rest of the log.
CREATE INDEX events_consumption_requests ON ledger.events (recorded_at)
    WHERE event_type = 'AppStoreNotificationReceived.v1' AND data ->> 'notificationType' = 'CONSUMPTION_REQUEST';
