-- An app's App Store Connect API key (Users and Access > Integrations > App Store Connect API, a
-- team key with the Sales or Finance role) and the vendor number its sales reports are filed
-- under: `ledger reports fetch` downloads Apple's Summary Sales Reports with it. The private key
-- is sealed like the Server API key (AES-256-GCM under LEDGER_SECRET_KEY, bound to the app); the
-- key id, issuer id and vendor number are not secret.
ALTER TABLE ledger.apps
    ADD COLUMN connect_key_id text,
    ADD COLUMN connect_issuer_id text,
    ADD COLUMN connect_private_key_sealed bytea,
    ADD COLUMN connect_sealed_with text,
    ADD COLUMN connect_vendor_number text CHECK (connect_vendor_number ~ '^[0-9]{1,20}$'),
    ADD CONSTRAINT apps_connect_key_whole CHECK (
        (connect_key_id IS NULL) = (connect_issuer_id IS NULL)
        AND (connect_key_id IS NULL) = (connect_private_key_sealed IS NULL)
        AND (connect_key_id IS NULL) = (connect_sealed_with IS NULL)
        AND (connect_key_id IS NULL) = (connect_vendor_number IS NULL)
    );

COMMENT ON COLUMN ledger.apps.connect_private_key_sealed IS 'The App Store Connect API private key (PEM), AES-256-GCM with "<bundle id> App Store Connect key" as authenticated data; never logged or returned.';

CREATE FUNCTION ledger.app_set_connect_key(
    p_bundle_id text, p_key_id text, p_issuer_id text, p_sealed bytea, p_sealed_with text, p_vendor_number text
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    UPDATE ledger.apps SET connect_key_id = p_key_id, connect_issuer_id = p_issuer_id, connect_private_key_sealed = p_sealed,
        connect_sealed_with = p_sealed_with, connect_vendor_number = p_vendor_number
    WHERE bundle_id = p_bundle_id;
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION ledger.app_set_connect_key(text, text, text, bytea, text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.app_set_connect_key(text, text, text, bytea, text, text) TO ledger_runtime;
