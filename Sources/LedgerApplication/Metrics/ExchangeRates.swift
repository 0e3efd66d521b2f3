import Foundation
import LedgerDomain

/// One unit of `currency` is worth `rate` units of `reportingCurrency` from `date` (yyyy-MM-dd) on,
/// until a later rate of the pair.
public struct ExchangeRate: Sendable, Hashable, Codable {
    public let reportingCurrency: String
    public let currency: String
    public let date: String
    public let rate: String

    public init(reportingCurrency: String, currency: String, date: String, rate: String) {
        self.reportingCurrency = reportingCurrency
        self.currency = currency
        self.date = date
        self.rate = rate
    }

    /// Reads a CSV file of rates: a header naming `date`, `currency`, `reporting_currency` and
    /// `rate` (in any order; other columns are refused), then one rate per line. Refused whole, with
    /// the line and column at fault, when anything in it is wrong.
    public static func parse(csv text: String) throws(AccessError) -> [ExchangeRate] {
        let lines = text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).map(String.init)
        guard let header = lines.first?.trimmingCharacters(in: .whitespaces), !header.isEmpty else {
            throw .invalidInput("line 1: the file is empty; it starts with the header date,currency,reporting_currency,rate")
        }
        let names = header.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        let expected = ["date", "currency", "reporting_currency", "rate"]
        guard Set(names) == Set(expected), names.count == expected.count else {
            throw .invalidInput("line 1: the header is '\(header)'; it names the columns date, currency, reporting_currency and rate, each once")
        }
        let column = Dictionary(uniqueKeysWithValues: names.enumerated().map { ($1, $0) })
        var rates: [ExchangeRate] = []
        var seen: [String: Int] = [:]
        for (index, line) in lines.enumerated().dropFirst() where !line.trimmingCharacters(in: .whitespaces).isEmpty {
            let number = index + 1
            let fields = line.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard fields.count == expected.count else {
                throw .invalidInput("line \(number): \(fields.count) fields; each line has \(expected.count): \(names.joined(separator: ","))")
            }
            func field(_ name: String) -> (value: String, column: Int) { (fields[column[name]!], column[name]! + 1) }
            let date = field("date"), currency = field("currency"), reporting = field("reporting_currency"), rate = field("rate")
            guard Self.isDay(date.value) else {
                throw .invalidInput("line \(number), column \(date.column) (date): '\(date.value)' is not a day such as 2026-11-30")
            }
            for code in [currency, reporting] where code.value.range(of: "^[A-Z]{3}$", options: .regularExpression) == nil {
                throw .invalidInput("line \(number), column \(code.column): '\(code.value)' is not an ISO 4217 currency code such as EUR")
            }
            guard currency.value != reporting.value else {
                throw .invalidInput("line \(number): a rate of \(currency.value) into itself is always 1; leave it out")
            }
            guard rate.value.range(of: "^[0-9]+(\\.[0-9]+)?$", options: .regularExpression) != nil, let value = Decimal(string: rate.value, locale: Locale(identifier: "en_US_POSIX")), value > 0 else {
                throw .invalidInput("line \(number), column \(rate.column) (rate): '\(rate.value)' is not a positive decimal such as 0.9234 (units of \(reporting.value) per \(currency.value))")
            }
            let key = "\(reporting.value) \(currency.value) \(date.value)"
            if let earlier = seen[key] {
                throw .invalidInput("line \(number): \(currency.value) into \(reporting.value) on \(date.value) was already given on line \(earlier)")
            }
            seen[key] = number
            rates.append(ExchangeRate(reportingCurrency: reporting.value, currency: currency.value, date: date.value, rate: rate.value))
        }
        guard !rates.isEmpty else { throw .invalidInput("line 2: the file has a header and no rates") }
        return rates
    }

    static func isDay(_ text: String) -> Bool {
        guard text.range(of: "^[0-9]{4}-[0-9]{2}-[0-9]{2}$", options: .regularExpression) != nil else { return false }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd"
        return formatter.date(from: text).map { formatter.string(from: $0) == text } ?? false
    }
}

/// Where the operator's exchange rates are kept.
public protocol ExchangeRateStore: Sendable {
    /// Sets every rate given, or none; returns how many were set.
    func set(_ rates: [ExchangeRate]) async throws -> Int
    /// The rates into a reporting currency (every one, when nil), by pair and date.
    func rates(into reportingCurrency: String?) async throws -> [ExchangeRate]
}

extension MetricsReport {
    /// The report's figures in one reporting currency: each currency's converted at the rate in
    /// force on the interval's last day (in the report's time zone), then added up. The figures in
    /// their own currencies stay in the report beside these.
    public struct Converted: Sendable, Hashable, Codable {
        /// A rate the conversion used.
        public struct RateUsed: Sendable, Hashable, Codable {
            public let interval: String
            public let currency: String
            public let rate: String
            /// The day the rate is from (the latest on or before the interval's last day).
            public let rateDate: String
        }

        /// Figures of a currency that has no rate for an interval: left out of the totals.
        public struct Unconverted: Sendable, Hashable, Codable {
            public let interval: String
            public let currency: String
        }

        public let currency: String
        public let subscriptions: [SubscriptionMetrics.Figures]
        public let refunds: [Refunds]
        /// Users add up across currencies: a user paying in two currencies in a month counts in each.
        public let cohorts: [CohortCell]
        public let rates: [RateUsed]
        public let unconverted: [Unconverted]
    }

    /// The report with its figures also in `reportingCurrency`, from `rates`.
    func converting(into reportingCurrency: String, rates: [ExchangeRate], intervals: [SubscriptionMetrics.Interval], zone: TimeZone) -> MetricsReport {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = zone
        let day = DateFormatter()
        day.locale = Locale(identifier: "en_US_POSIX")
        day.timeZone = zone
        day.dateFormat = "yyyy-MM-dd"
        // An interval's last day, by its label (months of the cohort table included).
        var lastDays = Dictionary(uniqueKeysWithValues: intervals.map { ($0.label, day.string(from: $0.end.addingTimeInterval(-1))) })
        func lastDay(of label: String) -> String? {
            if let known = lastDays[label] { return known }
            let parts = label.split(separator: "-").compactMap { Int($0) }
            guard parts.count == 2, let start = calendar.date(from: DateComponents(year: parts[0], month: parts[1], day: 1)),
                  let end = calendar.date(byAdding: .month, value: 1, to: start) else { return nil }
            lastDays[label] = day.string(from: end.addingTimeInterval(-1))
            return lastDays[label]
        }
        let byCurrency = Dictionary(grouping: rates.filter { $0.reportingCurrency == reportingCurrency }, by: \.currency)
            .mapValues { $0.sorted { $0.date < $1.date } }
        var used: Set<Converted.RateUsed> = []
        var unconverted: Set<Converted.Unconverted> = []
        /// The factor turning `currency` into the reporting currency in an interval; nil without a rate.
        func factor(_ currency: String, _ interval: String) -> Decimal? {
            if currency == reportingCurrency { return 1 }
            guard let last = lastDay(of: interval), let rate = byCurrency[currency]?.last(where: { $0.date <= last }),
                  let value = DecimalText.parse(rate.rate) else {
                unconverted.insert(.init(interval: interval, currency: currency))
                return nil
            }
            used.insert(.init(interval: interval, currency: currency, rate: rate.rate, rateDate: rate.date))
            return value
        }
        let places = Int16(Money.minorUnits(of: reportingCurrency))
        func money(_ value: Decimal) -> String { DecimalText.format(ProceedsRules.rounded(value, places: places)) }

        var figures: [String: SubscriptionMetrics.Figures] = [:]
        var mrr: [String: Decimal] = [:]
        for row in subscriptions {
            guard let rate = factor(row.currency, row.interval) else { continue }
            var total = figures[row.interval] ?? SubscriptionMetrics.Figures(interval: row.interval, currency: reportingCurrency)
            total.activeAtStart += row.activeAtStart
            total.activeAtEnd += row.activeAtEnd
            total.new += row.new
            total.renewed += row.renewed
            total.reactivated += row.reactivated
            total.churned += row.churned
            total.upgraded += row.upgraded
            total.crossgraded += row.crossgraded
            total.downgraded += row.downgraded
            total.trialsStarted += row.trialsStarted
            total.trialsConverted += row.trialsConverted
            total.trialsExpired += row.trialsExpired
            figures[row.interval] = total
            mrr[row.interval, default: 0] += (DecimalText.parse(row.mrr) ?? 0) * rate
        }
        let convertedFigures = figures.values.sorted { $0.interval < $1.interval }.map { total in
            var total = total
            total.mrr = money(mrr[total.interval] ?? 0)
            if total.activeAtStart > 0 {
                total.churnRate = DecimalText.format(ProceedsRules.rounded(Decimal(total.churned) / Decimal(total.activeAtStart), places: 4))
            }
            return total
        }

        struct Totals { var payments = 0, refunds = 0, gross: Decimal = 0, refunded: Decimal = 0, closed = true, closedAt: Date?, adjustments = 0 }
        var refundTotals: [String: Totals] = [:]
        for row in refunds {
            guard let rate = factor(row.currency, row.interval) else { continue }
            var total = refundTotals[row.interval] ?? Totals()
            total.payments += row.payments
            total.refunds += row.refunds
            total.gross += (DecimalText.parse(row.gross) ?? 0) * rate
            total.refunded += (DecimalText.parse(row.refunded) ?? 0) * rate
            total.closed = total.closed && row.basis == .closed
            total.closedAt = row.closedAt ?? total.closedAt
            total.adjustments += row.adjustments ?? 0
            refundTotals[row.interval] = total
        }
        let convertedRefunds = refundTotals.sorted { $0.key < $1.key }.map { interval, total in
            Refunds(interval: interval, currency: reportingCurrency, payments: total.payments, refunds: total.refunds, gross: money(total.gross),
                    refunded: money(total.refunded), basis: total.closed ? .closed : .live, closedAt: total.closed ? total.closedAt : nil,
                    adjustments: total.closed ? total.adjustments : nil)
        }

        struct Cell: Hashable { let cohort: String; let since: Int }
        var cells: [Cell: (users: Int, net: Decimal)] = [:]
        for cell in cohorts {
            let month = Self.month(cell.cohort, plus: cell.monthsSince)
            guard let rate = factor(cell.currency, month) else { continue }
            let key = Cell(cohort: cell.cohort, since: cell.monthsSince)
            let total = cells[key] ?? (0, 0)
            cells[key] = (total.users + cell.users, total.net + (DecimalText.parse(cell.net) ?? 0) * rate)
        }
        let convertedCohorts = cells.sorted { ($0.key.cohort, $0.key.since) < ($1.key.cohort, $1.key.since) }.map { key, total in
            CohortCell(cohort: key.cohort, monthsSince: key.since, currency: reportingCurrency, users: total.users, net: money(total.net))
        }
        var report = self
        report.converted = Converted(
            currency: reportingCurrency, subscriptions: convertedFigures, refunds: convertedRefunds, cohorts: convertedCohorts,
            rates: used.sorted { ($0.interval, $0.currency) < ($1.interval, $1.currency) },
            unconverted: unconverted.sorted { ($0.interval, $0.currency) < ($1.interval, $1.currency) }
        )
        return report
    }

    /// `yyyy-MM` plus some months.
    static func month(_ label: String, plus months: Int) -> String {
        let parts = label.split(separator: "-").compactMap { Int($0) }
        guard parts.count == 2 else { return label }
        let index = parts[0] * 12 + (parts[1] - 1) + months
        return String(format: "%04d-%02d", index / 12, index % 12 + 1)
    }
}
