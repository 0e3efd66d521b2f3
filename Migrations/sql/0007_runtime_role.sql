-- Two roles: the owner, who migrates, and the runtime role, which serves.
--
-- Until now one role both migrated and served, so the server's own credentials owned
-- ledger.events: they could grant UPDATE back, disable the refusing triggers, replace
-- ledger.append or drop the schema. From here on the server logs in as a member of
-- ledger_runtime, which
--   * reads every table of the schema;
--   * records events only through ledger.append (SECURITY DEFINER, fixed search_path);
--   * adds receipts and answers to their archives (INSERT only: the triggers refuse the rest,
--     and only their owner could disable them);
--   * writes the ledger's configuration and caches (apps, API keys, idempotency answers, the
--     projection registry) and the projections' rows, all derived from the log or outside it;
--   * creates, renames and drops projection tables only through the functions below, which
--     accept nothing but projection names and column types;
--   * owns nothing, and may not CREATE in the schema.
-- This file runs as the owner (`ledger migrate`, `ledger serve --migrate`, or the managed
-- server's owner role), which keeps every object it creates.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'ledger_runtime') THEN
        RAISE EXCEPTION 'the role ledger_runtime does not exist'
            USING ERRCODE = 'LW005',
                  HINT = 'As a superuser, once per server: CREATE ROLE ledger_runtime NOLOGIN; GRANT ledger_runtime TO <the login role of ledger serve>; then migrate again (the managed local PostgreSQL does this itself).';
    END IF;
    IF pg_has_role(current_user, 'ledger_runtime', 'MEMBER') AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'the role migrating (%) is a member of ledger_runtime', current_user
            USING ERRCODE = 'LW005',
                  HINT = 'Migrate as the owner role (LEDGER_OWNER_DATABASE_URL), not as the role the server runs as: the server must not own what it may only append to.';
    END IF;
END
$$;

REVOKE ALL ON SCHEMA ledger FROM PUBLIC;
GRANT USAGE ON SCHEMA ledger TO ledger_runtime;

REVOKE ALL ON ALL TABLES IN SCHEMA ledger FROM PUBLIC;
REVOKE ALL ON ALL SEQUENCES IN SCHEMA ledger FROM PUBLIC;
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ledger FROM PUBLIC;
GRANT SELECT ON ALL TABLES IN SCHEMA ledger TO ledger_runtime;
GRANT INSERT ON ledger.receipts, ledger.receipt_answers TO ledger_runtime;
GRANT INSERT, UPDATE, DELETE ON ledger.apps, ledger.api_keys, ledger.idempotency_keys, ledger.projections TO ledger_runtime;

-- Whatever later migrations create is readable by the server, and no function of the schema is
-- callable by everyone.
ALTER DEFAULT PRIVILEGES IN SCHEMA ledger GRANT SELECT ON TABLES TO ledger_runtime;
ALTER DEFAULT PRIVILEGES IN SCHEMA ledger REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC;

-- Appending runs with the owner's rights, on objects named in full: a caller's search_path
-- cannot slip another function or table in.
ALTER FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean)
    SECURITY DEFINER SET search_path = pg_catalog, ledger;
GRANT EXECUTE ON FUNCTION ledger.append(text, bigint, uuid[], text[], text[], text[], text[], boolean) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.event_content(bigint, text, bigint, uuid, text, jsonb, jsonb, timestamptz, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.follow_horizon() TO ledger_runtime;

-- Projection tables: ledger.<name>_v<version>, or _rebuild while a rebuild writes one. Nothing
-- else can be named through these functions, so none of them reaches the log or its archives.
CREATE FUNCTION ledger.projection_table_name(p_table text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog AS $$
BEGIN
    IF p_table IS NULL OR p_table !~ '^[a-z][a-z0-9_]{0,40}_v[0-9]{1,6}(_rebuild)?$' THEN
        RAISE EXCEPTION '"%" is not the name of a projection table (name_vN or name_vN_rebuild)', p_table
            USING ERRCODE = 'LW006';
    END IF;
    RETURN p_table;
END
$$;

CREATE FUNCTION ledger.projection_create_table(
    p_table text, p_columns text[], p_types text[], p_replace boolean
) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_table   text := ledger.projection_table_name(p_table);
    v_columns text := 'app text NOT NULL, user_id text NOT NULL';
    i         int;
BEGIN
    IF coalesce(cardinality(p_columns), 0) = 0 OR cardinality(p_columns) <> coalesce(cardinality(p_types), -1) THEN
        RAISE EXCEPTION 'a projection table needs as many column types as columns' USING ERRCODE = 'LW006';
    END IF;
    FOR i IN 1 .. cardinality(p_columns) LOOP
        IF p_columns[i] !~ '^[a-z][a-z0-9_]{0,62}$' OR p_columns[i] IN ('app', 'user_id') THEN
            RAISE EXCEPTION 'column name "%" is not allowed in a projection table', p_columns[i] USING ERRCODE = 'LW006';
        END IF;
        IF p_types[i] !~ '^(text|bigint|integer|boolean|numeric|timestamptz|date|jsonb)(\[\])?( NOT NULL)?$' THEN
            RAISE EXCEPTION 'column type "%" is not allowed in a projection table', p_types[i] USING ERRCODE = 'LW006';
        END IF;
        v_columns := v_columns || format(', %I %s', p_columns[i], p_types[i]);
    END LOOP;
    IF p_replace THEN
        EXECUTE format('DROP TABLE IF EXISTS ledger.%I', v_table);
    END IF;
    EXECUTE format('CREATE TABLE IF NOT EXISTS ledger.%I (%s)', v_table, v_columns);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ledger.%I TO ledger_runtime', v_table);
END
$$;

CREATE FUNCTION ledger.projection_create_index(p_table text, p_name text, p_columns text[]) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_table text := ledger.projection_table_name(p_table);
    v_list  text;
BEGIN
    IF coalesce(cardinality(p_columns), 0) = 0
       OR EXISTS (SELECT 1 FROM unnest(p_columns) c WHERE c !~ '^[a-z][a-z0-9_]{0,62}$') THEN
        RAISE EXCEPTION 'index columns % are not column names', p_columns USING ERRCODE = 'LW006';
    END IF;
    SELECT string_agg(format('%I', c), ', ') INTO v_list FROM unnest(p_columns) c;
    IF p_name IS NULL THEN
        EXECUTE format('CREATE INDEX ON ledger.%I (%s)', v_table, v_list);
    ELSE
        IF p_name !~ '^[a-z][a-z0-9_]{0,62}$' THEN
            RAISE EXCEPTION 'index name "%" is not allowed', p_name USING ERRCODE = 'LW006';
        END IF;
        EXECUTE format('CREATE INDEX IF NOT EXISTS %I ON ledger.%I (%s)', p_name, v_table, v_list);
    END IF;
END
$$;

CREATE FUNCTION ledger.projection_comment_column(p_table text, p_column text, p_meaning text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    EXECUTE format('COMMENT ON COLUMN ledger.%I.%I IS %L', ledger.projection_table_name(p_table), p_column, p_meaning);
END
$$;

CREATE FUNCTION ledger.projection_drop_table(p_table text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    EXECUTE format('DROP TABLE IF EXISTS ledger.%I', ledger.projection_table_name(p_table));
END
$$;

CREATE FUNCTION ledger.projection_rename_table(p_from text, p_to text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    EXECUTE format('ALTER TABLE ledger.%I RENAME TO %I',
                   ledger.projection_table_name(p_from), ledger.projection_table_name(p_to));
END
$$;

-- Readers query ledger.<name>, a view of the live version's table.
CREATE FUNCTION ledger.projection_point_view(p_view text, p_table text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_table text := ledger.projection_table_name(p_table);
BEGIN
    IF p_view IS NULL OR v_table !~ ('^' || p_view || '_v[0-9]+$') OR p_view !~ '^[a-z][a-z0-9_]{0,40}$' THEN
        RAISE EXCEPTION 'view "%" cannot show table "%": a projection''s view shows a version of that projection', p_view, p_table
            USING ERRCODE = 'LW006';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
               WHERE n.nspname = 'ledger' AND c.relname = p_view AND c.relkind <> 'v') THEN
        RAISE EXCEPTION '"%" is not a projection''s view', p_view USING ERRCODE = 'LW006';
    END IF;
    EXECUTE format('DROP VIEW IF EXISTS ledger.%I', p_view);
    EXECUTE format('CREATE VIEW ledger.%I AS SELECT * FROM ledger.%I', p_view, v_table);
    EXECUTE format('GRANT SELECT ON ledger.%I TO ledger_runtime', p_view);
END
$$;

CREATE FUNCTION ledger.projection_drop_view(p_view text) RETURNS void
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    IF p_view IS NULL OR p_view !~ '^[a-z][a-z0-9_]{0,40}$' OR EXISTS (
        SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ledger' AND c.relname = p_view AND c.relkind <> 'v'
    ) THEN
        RAISE EXCEPTION '"%" is not a projection''s view', p_view USING ERRCODE = 'LW006';
    END IF;
    EXECUTE format('DROP VIEW IF EXISTS ledger.%I', p_view);
END
$$;

-- The same functions' rights for the projection tables already made by the single role of before.
DO $$
DECLARE
    v_table text;
BEGIN
    FOR v_table IN
        SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = 'ledger' AND c.relkind = 'r' AND c.relname ~ '^[a-z][a-z0-9_]{0,40}_v[0-9]{1,6}(_rebuild)?$'
    LOOP
        EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ledger.%I TO ledger_runtime', v_table);
    END LOOP;
END
$$;

REVOKE ALL ON FUNCTION ledger.projection_table_name(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_create_table(text, text[], text[], boolean) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_create_index(text, text, text[]) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_comment_column(text, text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_drop_table(text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_rename_table(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_point_view(text, text) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.projection_drop_view(text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.projection_table_name(text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_create_table(text, text[], text[], boolean) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_create_index(text, text, text[]) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_comment_column(text, text, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_drop_table(text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_rename_table(text, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_point_view(text, text) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.projection_drop_view(text) TO ledger_runtime;
