import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO

/// Apple's sales reports in PostgreSQL: the files as received (`ledger.sales_reports`,
/// append-only, content-addressed, migration 0020), and the ledger's side of a reconciliation,
/// read from the live audit trail.
public struct PostgresSalesReports: SalesReportArchive, SalesReads, ReportSettings, Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func keep(_ file: SalesReportFileContent) async throws {
        try await client.query(
            """
            INSERT INTO ledger.sales_reports (content_hash, app, report_date, source, content)
            VALUES (\(file.contentHash), \(file.app), \(file.reportDate)::date, \(file.source), \(file.content))
            ON CONFLICT (content_hash) DO NOTHING
            """,
            logger: logger
        )
    }

    /// A kept file's bytes, as received.
    public func content(of contentHash: String) async throws -> Data? {
        let rows = try await client.query("SELECT content FROM ledger.sales_reports WHERE content_hash = \(contentHash)", logger: logger)
        for try await buffer in rows.decode(ByteBuffer.self) { return Data(buffer.readableBytesView) }
        return nil
    }

    public func salesGroups(app: String, from: Date, to: Date, timeZone: String) async throws -> [LedgerSalesGroup] {
        let rows = try await read {
            try await client.query(
                """
                WITH subscription_rows AS (
                    SELECT \(unescaped: PaidService.subscriptionColumns) FROM ledger.audit_trail
                    WHERE app = \(app) AND \(unescaped: PaidService.subscriptionConditions) AND purchase_date < \(to)
                ),
                \(unescaped: PaidService.paidCTE)
                SELECT to_char(r.occurred_at AT TIME ZONE \(timeZone), 'YYYY-MM-DD'), r.product_id, r.storefront, r.currency, r.price::text,
                       r.event = 'refund', r.environment = 'sandbox', sum(r.quantity)::bigint,
                       CASE WHEN bool_and(r.amount IS NOT NULL) THEN sum(r.amount)::text END,
                       bool_or(r.offer = 'free_trial'), (count(*) FILTER (WHERE r.refund = 'prorated'))::bigint,
                       coalesce(sum(r.quantity) FILTER (WHERE paid.past_a_year), 0)::bigint
                FROM ledger.audit_trail r
                LEFT JOIN paid ON paid.user_id = r.user_id AND paid.transaction_id = r.transaction_id
                WHERE r.app = \(app) AND r.occurred_at >= \(from) AND r.occurred_at < \(to)
                GROUP BY 1, 2, 3, 4, 5, 6, 7
                """,
                logger: logger
            )
        }
        var groups: [LedgerSalesGroup] = []
        for try await (day, product, storefront, currency, price, refund, sandbox, units, amount, freeTrial, prorated, pastAYear)
            in rows.decode((String, String, String?, String?, String?, Bool, Bool, Int, String?, Bool, Int, Int).self) {
            groups.append(LedgerSalesGroup(
                grain: .init(day: day, productId: product, storefront: storefront, currency: currency, price: price, refund: refund, sandbox: sandbox),
                units: units, amount: amount, freeTrial: freeTrial, prorated: prorated, pastAYearUnits: pastAYear
            ))
        }
        return groups
    }

    public func transactions(app: String, in grain: LedgerSalesGroup.Grain, timeZone: String, limit: Int) async throws -> [String] {
        guard limit > 0 else { return [] }
        let rows = try await read {
            try await client.query(
                """
                SELECT transaction_id FROM ledger.audit_trail
                WHERE app = \(app)
                  AND occurred_at >= (\(grain.day)::date)::timestamp AT TIME ZONE \(timeZone)
                  AND occurred_at < (\(grain.day)::date + 1)::timestamp AT TIME ZONE \(timeZone)
                  AND product_id = \(grain.productId) AND storefront IS NOT DISTINCT FROM \(grain.storefront)
                  AND currency IS NOT DISTINCT FROM \(grain.currency) AND price::text IS NOT DISTINCT FROM \(grain.price)
                  AND (event = 'refund') = \(grain.refund) AND (environment = 'sandbox') = \(grain.sandbox)
                ORDER BY position
                LIMIT \(limit)
                """,
                logger: logger
            )
        }
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    // MARK: Proceeds rules

    public func rules(app: String) async throws -> ProceedsRules {
        var rules = ProceedsRules()
        let rates = try await client.query(
            "SELECT country, to_char(valid_from, 'YYYY-MM-DD'), share::text FROM ledger.tax_rates ORDER BY country, valid_from", logger: logger
        )
        for try await (country, from, share) in rates.decode((String, String, String).self) {
            rules.taxRates.append(.init(country: country, validFrom: from, share: share))
        }
        let periods = try await client.query("""
            SELECT to_char(valid_from, 'YYYY-MM-DD'), to_char(valid_to, 'YYYY-MM-DD') FROM ledger.small_business_periods
            WHERE app = \(app) ORDER BY valid_from
            """, logger: logger)
        for try await (from, to) in periods.decode((String, String?).self) { rules.smallBusiness.append(.init(validFrom: from, validTo: to)) }
        return rules
    }

    public func reportingTimeZone(app: String) async throws -> String? {
        let rows = try await client.query("SELECT reporting_time_zone FROM ledger.apps WHERE bundle_id = \(app)", logger: logger)
        for try await zone in rows.decode(String?.self) { return zone }
        throw AccessError.unknownApp(app)
    }

    /// Sets the app's reporting time zone (the owner's function, migration 0023).
    public func setReportingTimeZone(app: String, _ zone: String) async throws {
        guard TimeZone(identifier: zone) != nil, zone.contains("/") || zone == "UTC" else {
            throw AccessError.invalidInput("'\(zone)' is not an IANA time zone such as America/Los_Angeles, Europe/Paris, Asia/Tokyo or Australia/Perth")
        }
        let rows = try await client.query("SELECT ledger.app_set_reporting_time_zone(\(app), \(zone))", logger: logger)
        for try await set in rows.decode(Bool.self) where set { return }
        throw AccessError.unknownApp(app)
    }

    /// Sets the tax share of a country's prices from a day on (the owner's function, migration 0021).
    public func setTaxRate(country: String, validFrom: String, share: String) async throws {
        guard country.count == 2, country.allSatisfy({ $0.isASCII && $0.isUppercase }), CountryCodes.alpha3(fromAlpha2: country) != nil else {
            throw AccessError.invalidInput("'\(country)' is not an ISO 3166-1 alpha-2 country code such as FR or JP")
        }
        guard let value = Decimal(string: share, locale: Locale(identifier: "en_US_POSIX")), value >= 0, value < 1,
              share.allSatisfy({ $0.isNumber || $0 == "." })
        else {
            throw AccessError.invalidInput("a tax share is a decimal from 0 to below 1, such as 0.1667 for prices that include 20 % VAT; not '\(share)'")
        }
        try Self.requireDay(validFrom, "--from")
        try await client.query("SELECT ledger.set_tax_rate(\(country), \(validFrom)::date, \(share)::numeric)", logger: logger)
    }

    /// Records a period of the app in the Small Business Program (the owner's function, migration 0021).
    public func setSmallBusiness(app: String, from: String, to: String?) async throws {
        try Self.requireDay(from, "--from")
        if let to {
            try Self.requireDay(to, "--to")
            guard to > from else { throw AccessError.invalidInput("--to (\(to)) must come after --from (\(from))") }
        }
        let rows = try await client.query("SELECT ledger.app_set_small_business(\(app), \(from)::date, \(to)::date)", logger: logger)
        for try await set in rows.decode(Bool.self) where set { return }
        throw AccessError.unknownApp(app)
    }

    static func requireDay(_ text: String, _ name: String) throws {
        let format = Date.ISO8601FormatStyle().year().month().day()
        guard text.count == 10, let date = try? format.parse(text), format.format(date) == text else {
            throw AccessError.invalidInput("\(name) '\(text)' is not a date: use yyyy-MM-dd, e.g. 2026-11-01")
        }
    }

    private func read<Rows>(_ body: () async throws -> Rows) async throws -> Rows {
        try await readingAuditTrail(body)
    }
}

/// A read of the audit trail: `notReady` while its live version is not there yet (a view without
/// this version's columns, or no projection runner yet), rather than SQL.
func readingAuditTrail<Rows>(_ body: () async throws -> Rows) async throws -> Rows {
    do {
        return try await body()
    } catch let error as PSQLError {
        let state = error.ledgerSQLState
        if state == .undefinedColumn || state == .undefinedTable { throw AuditQueryError.notReady }
        throw error
    }
}
