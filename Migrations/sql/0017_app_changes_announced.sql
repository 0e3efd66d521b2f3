-- A change of an app (its shared secret set, sealed or cleared, its App Store Server API key, the
-- app removed) is announced on ledger_changes like a revocation of a key: 'api_keys <generation>'
-- (see 0012_change_notifications.sql). Servers keep the shared secrets they have read beside the
-- keys they have accepted, and forget both on every such announcement, so that a receipt's
-- verification does not ask the database for the secret each time and never uses one replaced
-- meanwhile. Adding an app announces nothing: nobody kept anything of it. Per row, so that only
-- rows that did change announce (`ledger apps add` of a new app is an INSERT … ON CONFLICT DO
-- UPDATE, whose statement-level UPDATE triggers fire even when no row was updated).

CREATE TRIGGER apps_changed_announced
    AFTER UPDATE OR DELETE ON ledger.apps
    FOR EACH ROW EXECUTE FUNCTION ledger.announce_api_keys_changed();

CREATE TRIGGER apps_truncated_announced
    AFTER TRUNCATE ON ledger.apps
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.announce_api_keys_changed();
