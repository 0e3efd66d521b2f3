import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// The operator's exchange rates in PostgreSQL (`ledger.exchange_rates`, migration 0025).
public struct PostgresExchangeRates: ExchangeRateStore, Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func set(_ rates: [ExchangeRate]) async throws -> Int {
        let rows = try await client.query("""
            SELECT ledger.set_exchange_rates(\(rates.map(\.reportingCurrency)), \(rates.map(\.currency)), \(rates.map(\.date))::date[],
                                             \(rates.map(\.rate))::numeric[])
            """, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    public func rates(into reportingCurrency: String?) async throws -> [ExchangeRate] {
        let rows = try await client.query("""
            SELECT reporting_currency, currency, to_char(rate_date, 'YYYY-MM-DD'), rate::text FROM ledger.exchange_rates
            WHERE \(reportingCurrency)::text IS NULL OR reporting_currency = \(reportingCurrency)
            ORDER BY reporting_currency, currency, rate_date
            """, logger: logger)
        var result: [ExchangeRate] = []
        for try await (reporting, currency, date, rate) in rows.decode((String, String, String, String).self) {
            result.append(ExchangeRate(reportingCurrency: reporting, currency: currency, date: date, rate: DecimalText.canonical(rate)))
        }
        return result
    }
}
