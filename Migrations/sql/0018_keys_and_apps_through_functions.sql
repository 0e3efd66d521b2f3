-- The server's role writes apps and API keys only through the owner's functions below.
--
-- Until now ledger_runtime could INSERT, UPDATE and DELETE ledger.apps and ledger.api_keys: a
-- process holding its credentials could un-revoke a key (UPDATE … SET revoked_at = NULL), mint
-- keys of its own or rewrite an app. From here on:
--   * apps are registered, their secrets sealed and their Server API keys set through functions
--     that take exactly those values;
--   * keys are created and revoked through functions; a revocation is recorded in the log, on the
--     app's `keys/<bundle id>` stream (APIKeyRevoked.v1, with the key's id and when), so that it
--     can be shown whatever becomes of the table;
--   * a revoked key stays revoked, and no key is deleted or has its secret, app, scopes or
--     creation changed, whoever tries (a trigger, for the owner too);
--   * only the ledger's roles may connect to the database: advisory locks (the append's critical
--     section, the projections' leadership) are per database, so no other login role can take them.

REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON ledger.apps, ledger.api_keys FROM ledger_runtime;

-- Registers an app, or replaces its sealed shared secret; returns whether it is new.
CREATE FUNCTION ledger.app_register(p_bundle_id text, p_sealed bytea, p_sealed_with text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_inserted boolean;
BEGIN
    IF (p_sealed IS NULL) <> (p_sealed_with IS NULL) THEN
        RAISE EXCEPTION 'a sealed shared secret needs the id of the key that sealed it' USING ERRCODE = 'LW006';
    END IF;
    INSERT INTO ledger.apps (bundle_id, shared_secret_sealed, shared_secret_key_id) VALUES (p_bundle_id, p_sealed, p_sealed_with)
    ON CONFLICT (bundle_id) DO UPDATE SET
        shared_secret = CASE WHEN EXCLUDED.shared_secret_sealed IS NULL THEN ledger.apps.shared_secret END,
        shared_secret_sealed = coalesce(EXCLUDED.shared_secret_sealed, ledger.apps.shared_secret_sealed),
        shared_secret_key_id = coalesce(EXCLUDED.shared_secret_key_id, ledger.apps.shared_secret_key_id)
    RETURNING (xmax = 0) INTO v_inserted;
    RETURN v_inserted;
END
$$;

-- Replaces an app's plaintext shared secret by its sealed form, only if it is still that plaintext.
CREATE FUNCTION ledger.app_seal_secret(p_bundle_id text, p_plaintext text, p_sealed bytea, p_sealed_with text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    UPDATE ledger.apps SET shared_secret = NULL, shared_secret_sealed = p_sealed, shared_secret_key_id = p_sealed_with
    WHERE bundle_id = p_bundle_id AND shared_secret = p_plaintext AND p_sealed IS NOT NULL AND p_sealed_with IS NOT NULL;
    RETURN FOUND;
END
$$;

-- Sets (or replaces) an app's App Store Server API key; false for an app that is not registered.
CREATE FUNCTION ledger.app_set_server_api_key(
    p_bundle_id text, p_key_id text, p_issuer_id text, p_sealed bytea, p_sealed_with text
) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    UPDATE ledger.apps SET server_api_key_id = p_key_id, server_api_issuer_id = p_issuer_id,
        server_api_private_key_sealed = p_sealed, server_api_sealed_with = p_sealed_with
    WHERE bundle_id = p_bundle_id;
    RETURN FOUND;
END
$$;

-- Creates a key. Returns when it was created.
CREATE FUNCTION ledger.key_create(p_key_id text, p_app text, p_secret_hash bytea, p_scopes text[], p_name text) RETURNS timestamptz
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_created timestamptz;
BEGIN
    INSERT INTO ledger.api_keys (key_id, app, secret_hash, scopes, name) VALUES (p_key_id, p_app, p_secret_hash, p_scopes, p_name)
    RETURNING created_at INTO v_created;
    RETURN v_created;
END
$$;

-- Revokes a key, once and for ever; the first revocation is recorded in the log. Nothing for an
-- unknown key.
CREATE FUNCTION ledger.key_revoke(p_key_id text)
RETURNS TABLE (app text, scopes text, name text, created_at timestamptz, revoked_at timestamptz)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
#variable_conflict use_column
DECLARE
    v_was timestamptz;
    v_app text;
BEGIN
    SELECT k.revoked_at, k.app INTO v_was, v_app FROM ledger.api_keys k WHERE k.key_id = p_key_id;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    IF v_was IS NULL THEN
        -- The append first (it must be its transaction's first write); its key records the
        -- revocation once, whoever revokes at the same moment.
        PERFORM * FROM ledger.append(
            'keys/' || v_app, NULL, ARRAY[gen_random_uuid()], ARRAY['APIKeyRevoked.v1'],
            ARRAY[jsonb_build_object('keyId', p_key_id, 'revokedAt', now())::text],
            ARRAY['{"source":"ledger keys"}'], ARRAY['apikey/' || p_key_id || '/revoked'], true
        );
        UPDATE ledger.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE key_id = p_key_id;
    END IF;
    RETURN QUERY SELECT k.app, array_to_string(k.scopes, ','), k.name, k.created_at, k.revoked_at
                 FROM ledger.api_keys k WHERE k.key_id = p_key_id;
END
$$;

-- A revoked key stays revoked; a key is never deleted, and what identifies it never changes.
CREATE FUNCTION ledger.api_keys_final() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, ledger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        RAISE EXCEPTION 'API key % is never deleted: revoke it (ledger keys revoke)', OLD.key_id USING ERRCODE = 'LW007';
    END IF;
    IF OLD.revoked_at IS NOT NULL AND NEW.revoked_at IS DISTINCT FROM OLD.revoked_at THEN
        RAISE EXCEPTION 'API key % was revoked at %; revoked is revoked: create a new key', OLD.key_id, OLD.revoked_at USING ERRCODE = 'LW007';
    END IF;
    IF NEW.key_id <> OLD.key_id OR NEW.app <> OLD.app OR NEW.secret_hash <> OLD.secret_hash OR NEW.scopes <> OLD.scopes
       OR NEW.created_at <> OLD.created_at THEN
        RAISE EXCEPTION 'API key % cannot be changed, only revoked: create a new key', OLD.key_id USING ERRCODE = 'LW007';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER api_keys_final BEFORE UPDATE OR DELETE ON ledger.api_keys FOR EACH ROW EXECUTE FUNCTION ledger.api_keys_final();

CREATE FUNCTION ledger.api_keys_not_truncated() RETURNS trigger
LANGUAGE plpgsql SET search_path = pg_catalog, ledger AS $$
BEGIN
    RAISE EXCEPTION 'API keys are never deleted: revoke them (ledger keys revoke)' USING ERRCODE = 'LW007';
END
$$;

CREATE TRIGGER api_keys_not_truncated BEFORE TRUNCATE ON ledger.api_keys FOR EACH STATEMENT EXECUTE FUNCTION ledger.api_keys_not_truncated();

REVOKE ALL ON FUNCTION ledger.app_register(text, bytea, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.app_seal_secret(text, text, bytea, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.app_set_server_api_key(text, text, text, bytea, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.key_create(text, text, bytea, text[], text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.key_revoke(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.app_register(text, bytea, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.app_seal_secret(text, text, bytea, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.app_set_server_api_key(text, text, text, bytea, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.key_create(text, text, bytea, text[], text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.key_revoke(text) TO ledger_runtime;

-- Only the ledger's roles connect. The database's owner (or a superuser) may change who
-- connects; a migration run by a role that may not leaves it as it was and says so.
DO $$
BEGIN
    EXECUTE format('REVOKE CONNECT ON DATABASE %I FROM PUBLIC', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO ledger_runtime, %I', current_database(), current_user);
EXCEPTION WHEN insufficient_privilege THEN
    RAISE WARNING 'every login role of the server may still connect to database %: its owner should REVOKE CONNECT ON DATABASE % FROM PUBLIC and GRANT CONNECT to ledger_runtime and the owner role (ledger serve reports this until then)',
        current_database(), current_database();
END
$$;
