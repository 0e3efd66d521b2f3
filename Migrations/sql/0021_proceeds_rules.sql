-- What the ledger needs to estimate a developer's proceeds where no Apple report covers a sale:
-- the tax Apple takes out of the customer's price in each country, and the periods an app was in
-- the App Store Small Business Program (a reduced commission). The operator sets both
-- (`ledger reports tax-rate`, `ledger reports small-business`); Apple's report, when imported, is
-- always preferred to an estimate.

-- The share of a customer price that is tax, by the buyer's country (ISO 3166-1 alpha-2), from a
-- day on: 0.1667 where a price includes 20 % VAT (0.20 / 1.20). Countries whose prices do not
-- include tax (the United States, Canada) have 0. A country without a rate has no estimate.
CREATE TABLE ledger.tax_rates (
    country     text        NOT NULL CHECK (country ~ '^[A-Z]{2}$'),
    valid_from  date        NOT NULL,
    share       numeric     NOT NULL CHECK (share >= 0 AND share < 1),
    set_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (country, valid_from)
);

COMMENT ON TABLE ledger.tax_rates IS 'The share of a customer price that is tax, per country, from a day on: for estimated proceeds.';

CREATE TABLE ledger.small_business_periods (
    app         text        NOT NULL REFERENCES ledger.apps (bundle_id),
    valid_from  date        NOT NULL,
    valid_to    date,
    set_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (app, valid_from),
    CHECK (valid_to IS NULL OR valid_to > valid_from)
);

COMMENT ON TABLE ledger.small_business_periods IS 'Periods [valid_from, valid_to) an app was in the App Store Small Business Program: 15 % commission.';

GRANT SELECT ON ledger.tax_rates, ledger.small_business_periods TO ledger_runtime;

CREATE FUNCTION ledger.set_tax_rate(p_country text, p_valid_from date, p_share numeric) RETURNS void
LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
    INSERT INTO ledger.tax_rates (country, valid_from, share) VALUES (p_country, p_valid_from, p_share)
    ON CONFLICT (country, valid_from) DO UPDATE SET share = excluded.share, set_at = clock_timestamp();
$$;

CREATE FUNCTION ledger.app_set_small_business(p_bundle_id text, p_valid_from date, p_valid_to date) RETURNS boolean
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, ledger AS $$
BEGIN
    PERFORM 1 FROM ledger.apps WHERE bundle_id = p_bundle_id;
    IF NOT FOUND THEN RETURN false; END IF;
    INSERT INTO ledger.small_business_periods (app, valid_from, valid_to) VALUES (p_bundle_id, p_valid_from, p_valid_to)
    ON CONFLICT (app, valid_from) DO UPDATE SET valid_to = excluded.valid_to, set_at = clock_timestamp();
    RETURN true;
END
$$;

REVOKE ALL ON FUNCTION ledger.set_tax_rate(text, date, numeric) FROM PUBLIC;
REVOKE ALL ON FUNCTION ledger.app_set_small_business(text, date, date) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION ledger.set_tax_rate(text, date, numeric) TO ledger_runtime;
GRANT EXECUTE ON FUNCTION ledger.app_set_small_business(text, date, date) TO ledger_runtime;
