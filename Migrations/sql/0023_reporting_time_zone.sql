-- The time zone of an app's Sales and Trends reports: that of the territories its agreement
-- covers (Pacific Time for worldwide agreements, the default when none is set; Central Europe,
-- Japan or Australian Western time for agreements of those territories only). Reconciliation
-- reads the ledger's sales by the reporting days of this zone. Set with `ledger reports time-zone`.
ALTER TABLE ledger.apps ADD COLUMN reporting_time_zone text;

CREATE FUNCTION ledger.app_set_reporting_time_zone(p_bundle_id text, p_time_zone text) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    PERFORM now() AT TIME ZONE p_time_zone;  -- an unknown zone is refused here
    UPDATE ledger.apps SET reporting_time_zone = p_time_zone WHERE bundle_id = p_bundle_id;
    RETURN FOUND;
END
$$;

REVOKE ALL ON FUNCTION ledger.app_set_reporting_time_zone(text, text) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.app_set_reporting_time_zone(text, text) TO ledger_runtime;
