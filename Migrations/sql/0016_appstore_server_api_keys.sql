-- An app's key for the App Store Server API (App Store Connect > Users and Access > Integrations):
-- the ledger asks Apple for a customer's transaction history with it (`ledger appstore backfill`,
-- and a restore of a purchase the ledger never saw). The private key is kept sealed like the
-- shared secret (AES-256-GCM under LEDGER_SECRET_KEY, bound to the app), with the id of the key
-- that sealed it; the key id and issuer id are not secret.
ALTER TABLE ledger.apps
    ADD COLUMN server_api_key_id text,
    ADD COLUMN server_api_issuer_id text,
    ADD COLUMN server_api_private_key_sealed bytea,
    ADD COLUMN server_api_sealed_with text,
    ADD CONSTRAINT apps_server_api_key_whole CHECK (
        (server_api_key_id IS NULL) = (server_api_issuer_id IS NULL)
        AND (server_api_key_id IS NULL) = (server_api_private_key_sealed IS NULL)
        AND (server_api_key_id IS NULL) = (server_api_sealed_with IS NULL)
    );

COMMENT ON COLUMN ledger.apps.server_api_private_key_sealed IS 'The App Store Server API private key (PEM), AES-256-GCM with "<bundle id> server API key" as authenticated data; never logged or returned.';
