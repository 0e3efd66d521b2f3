-- Changes that servers keep in memory are announced on the channel ledger_changes.
--
-- A server answers reads without asking the database who the caller is or how far the
-- projections have come: it keeps the API keys it has accepted and the projection registry in
-- memory, and must learn at once when another session changes them.
--
--   * api_keys <generation>: a key was revoked or removed (any UPDATE, DELETE or TRUNCATE of
--     ledger.api_keys). Servers forget every key they accepted; the generation only grows, so a
--     server that finds it moved while it was not listening forgets them too.
--   * projection <name> <version> <status> <position> <error_position or -> <change>: a row of
--     ledger.projections as it now stands. <change> grows with every change of the row, so a
--     server that loaded the registry after a change ignores the older announcement of it.
--   * projection_removed <name> <version>: the row is gone.
--
-- NOTIFY is sent at commit and in commit order, to every session listening then. The triggers
-- run as their owner, so the server's role needs no right on the sequences but reading them.

CREATE SEQUENCE ledger.api_key_generation;
CREATE SEQUENCE ledger.projection_change;
GRANT SELECT ON SEQUENCE ledger.api_key_generation, ledger.projection_change TO ledger_runtime;

ALTER TABLE ledger.projections ADD COLUMN change bigint NOT NULL DEFAULT 0;

COMMENT ON COLUMN ledger.projections.change IS
    'Grows with every change of the row (ledger.projection_change): orders the announcements on ledger_changes.';

CREATE FUNCTION ledger.announce_api_keys_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    PERFORM pg_notify('ledger_changes', 'api_keys ' || nextval('ledger.api_key_generation'));
    RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_changed_announced
    AFTER UPDATE OR DELETE ON ledger.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.announce_api_keys_changed();

CREATE TRIGGER api_keys_truncated_announced
    AFTER TRUNCATE ON ledger.api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.announce_api_keys_changed();

CREATE FUNCTION ledger.number_projection_change() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    NEW.change := nextval('ledger.projection_change');
    RETURN NEW;
END
$$;

CREATE TRIGGER projections_change_numbered
    BEFORE INSERT OR UPDATE ON ledger.projections
    FOR EACH ROW EXECUTE FUNCTION ledger.number_projection_change();

CREATE FUNCTION ledger.announce_projection_changed() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_notify('ledger_changes', 'projection_removed ' || OLD.name || ' ' || OLD.version);
        RETURN NULL;
    END IF;
    PERFORM pg_notify('ledger_changes', concat_ws(' ', 'projection', NEW.name, NEW.version, NEW.status, NEW.position,
                                                  coalesce(NEW.error_position::text, '-'), NEW.change));
    RETURN NULL;
END
$$;

CREATE TRIGGER projections_changed_announced
    AFTER INSERT OR UPDATE OR DELETE ON ledger.projections
    FOR EACH ROW EXECUTE FUNCTION ledger.announce_projection_changed();

REVOKE ALL ON FUNCTION ledger.announce_api_keys_changed(), ledger.number_projection_change(),
    ledger.announce_projection_changed() FROM PUBLIC;

CREATE FUNCTION ledger.announce_projections_reset() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    PERFORM pg_notify('ledger_changes', 'projections_reset');
    RETURN NULL;
END
$$;

CREATE TRIGGER projections_truncated_announced
    AFTER TRUNCATE ON ledger.projections
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.announce_projections_reset();

REVOKE ALL ON FUNCTION ledger.announce_projections_reset() FROM PUBLIC;
