-- Apple's sales reports (Sales and Trends, Summary Sales Report, daily), kept as received.
--
-- The log records each report's in-app purchase lines as a fact (SalesReportReceived on the
-- stream reports/<bundle id>); this table keeps the file it came from, byte for byte (gzip or
-- plain), content-addressed by the SHA-256 of those bytes and append-only like the receipts: the
-- same file twice is kept once, and nothing kept is changed or removed. A corrected report of a
-- day is another file, and another fact that supersedes the first.
CREATE TABLE ledger.sales_reports (
    content_hash    text        PRIMARY KEY CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    app             text        NOT NULL REFERENCES ledger.apps (bundle_id),
    report_date     date        NOT NULL,
    source          text        NOT NULL,
    content         bytea       NOT NULL,
    recorded_at     timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE INDEX sales_reports_app_day ON ledger.sales_reports (app, report_date);

COMMENT ON TABLE ledger.sales_reports IS 'Every sales report file imported, as received, by the SHA-256 of its bytes (contentHash in SalesReportReceived). Append-only.';

CREATE TRIGGER sales_reports_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.sales_reports
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_document_change();
CREATE TRIGGER sales_reports_refuse_truncate BEFORE TRUNCATE ON ledger.sales_reports
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_document_change();

REVOKE ALL ON ledger.sales_reports FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON ledger.sales_reports FROM %I', current_user);
END
$$;
GRANT SELECT, INSERT ON ledger.sales_reports TO ledger_runtime;
