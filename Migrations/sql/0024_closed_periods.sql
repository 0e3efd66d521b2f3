-- The audit rows a closed period's figures add up, kept as they stood when finance closed it.
--
-- The close itself is a fact in the log (PeriodClosed on periods/<bundle id>, signed with the
-- anchor key), holding the figures, the log position they reflect and `rows` and `rowsChecksum`
-- of these rows. Keeping the rows lets every later change to the period be found row by row and
-- named: a row recorded after the close, or a row the ledger now sees otherwise (a later fact, a
-- replay of a fixed fold). Append-only like the documents: nothing kept is changed or removed.
CREATE TABLE ledger.closed_period_rows (
    close_id        uuid        NOT NULL,
    app             text        NOT NULL REFERENCES ledger.apps (bundle_id),
    position        bigint      NOT NULL,
    event           text        NOT NULL,
    user_id         text        NOT NULL,
    transaction_id  text        NOT NULL,
    environment     text        NOT NULL,
    product_id      text        NOT NULL,
    storefront      text,
    currency        text,
    price           numeric,
    quantity        bigint      NOT NULL,
    amount          numeric,
    refund          text,
    -- What the row's proceeds depend on beyond its columns (see ProceedsBasis).
    reporting_day   text        NOT NULL,
    past_a_year     boolean     NOT NULL,
    PRIMARY KEY (close_id, position, event)
);

COMMENT ON TABLE ledger.closed_period_rows IS 'The audit rows of each closed period as they stood at the close (close_id of PeriodClosed). Append-only.';

-- A row's checksum, added up over a close's rows into PeriodClosed.rowsChecksum: the first 60
-- bits of the MD5 of its columns, as a number.
CREATE FUNCTION ledger.closed_row_checksum(
    p_position bigint, p_event text, p_user_id text, p_transaction_id text, p_environment text, p_product_id text,
    p_currency text, p_quantity bigint, p_amount numeric
) RETURNS numeric
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT (('x' || substr(md5(concat_ws('|', p_position, p_event, p_user_id, p_transaction_id, p_environment, p_product_id,
                                         coalesce(p_currency, ''), p_quantity, coalesce(p_amount::text, ''))), 1, 15))::bit(60)::bigint)::numeric
$$;

CREATE TRIGGER closed_period_rows_refuse_update_delete BEFORE UPDATE OR DELETE ON ledger.closed_period_rows
    FOR EACH ROW EXECUTE FUNCTION ledger.refuse_document_change();
CREATE TRIGGER closed_period_rows_refuse_truncate BEFORE TRUNCATE ON ledger.closed_period_rows
    FOR EACH STATEMENT EXECUTE FUNCTION ledger.refuse_document_change();

REVOKE ALL ON ledger.closed_period_rows FROM PUBLIC;
DO $$
BEGIN
    EXECUTE format('REVOKE UPDATE, DELETE, TRUNCATE ON ledger.closed_period_rows FROM %I', current_user);
END
$$;
GRANT SELECT, INSERT ON ledger.closed_period_rows TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.closed_row_checksum(bigint, text, text, text, text, text, text, bigint, numeric) TO ledger_runtime;
