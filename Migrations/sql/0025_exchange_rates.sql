-- Exchange rates the operator imports (`ledger audit rates import`), so that the subscription
-- metrics can also be read in one reporting currency. One unit of `currency` is worth `rate` units
-- of `reporting_currency` from `rate_date` on, until a later rate of the pair. The figures in
-- their own currencies are always kept beside the converted ones, which name the rate and its
-- date; a currency without a rate is left out of the converted totals and named, never guessed.
CREATE TABLE ledger.exchange_rates (
    reporting_currency text        NOT NULL CHECK (reporting_currency ~ '^[A-Z]{3}$'),
    currency           text        NOT NULL CHECK (currency ~ '^[A-Z]{3}$'),
    rate_date          date        NOT NULL,
    rate               numeric     NOT NULL CHECK (rate > 0),
    set_at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (reporting_currency, currency, rate_date),
    CHECK (currency <> reporting_currency)
);

COMMENT ON TABLE ledger.exchange_rates IS 'One unit of currency is rate units of reporting_currency from rate_date on: for metrics in one reporting currency.';

GRANT SELECT ON ledger.exchange_rates TO ledger_runtime;

-- A file's rates at once: all of them are set, or none (a later import of the same day replaces the rate).
CREATE FUNCTION ledger.set_exchange_rates(p_reporting text[], p_currency text[], p_date date[], p_rate numeric[]) RETURNS integer
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
DECLARE
    v_count integer;
BEGIN
    IF cardinality(p_reporting) IS DISTINCT FROM cardinality(p_currency) OR cardinality(p_currency) IS DISTINCT FROM cardinality(p_date)
       OR cardinality(p_date) IS DISTINCT FROM cardinality(p_rate) THEN
        RAISE EXCEPTION 'exchange rates need as many reporting currencies, currencies, dates and rates' USING ERRCODE = '22023';
    END IF;
    INSERT INTO ledger.exchange_rates (reporting_currency, currency, rate_date, rate)
    SELECT * FROM unnest(p_reporting, p_currency, p_date, p_rate)
    ON CONFLICT (reporting_currency, currency, rate_date) DO UPDATE SET rate = excluded.rate, set_at = clock_timestamp();
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;

REVOKE ALL ON FUNCTION ledger.set_exchange_rates(text[], text[], date[], numeric[]) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.set_exchange_rates(text[], text[], date[], numeric[]) TO ledger_runtime;
