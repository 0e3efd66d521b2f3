import Foundation
import LedgerDomain
import LedgerProjections

/// What `GET /v1/audit/metrics` and `ledger audit metrics` answer: the subscription figures, the
/// refund rates and the cohort table of an app, per interval and currency (never added across
/// currencies), as the log stood at `asOf`.
public struct MetricsReport: Sendable, Hashable, Codable {
    /// Money taken and given back in one interval and currency, all product types.
    public struct Refunds: Sendable, Hashable, Codable {
        /// Where a row's figures come from.
        public enum Basis: String, Sendable, Hashable, Codable {
            /// The audit trail as it stands (or stood at `asOf`).
            case live
            /// A closed month: the figures its close recorded, plus the adjustments booked since.
            case closed
        }

        public let interval: String
        public let currency: String
        /// Payment rows (purchases, renewals, upgrades, crossgrades, free trials included, as the summary counts them) and refund rows.
        public let payments: Int
        public let refunds: Int
        public let gross: String
        public let refunded: String
        /// refunds / payments, and refunded / gross; nil when there were none.
        public let refundRateByCount: String?
        public let refundRateByAmount: String?
        public let basis: Basis
        /// Closed months: when the close was recorded, and how many adjustments have been booked since.
        public let closedAt: Date?
        public let adjustments: Int?

        public init(interval: String, currency: String, payments: Int, refunds: Int, gross: String, refunded: String, basis: Basis = .live,
                    closedAt: Date? = nil, adjustments: Int? = nil) {
            self.interval = interval
            self.currency = currency
            self.payments = payments
            self.refunds = refunds
            self.gross = gross
            self.refunded = refunded
            self.basis = basis
            self.closedAt = closedAt
            self.adjustments = adjustments
            refundRateByCount = payments > 0 ? DecimalText.format(ProceedsRules.rounded(Decimal(refunds) / Decimal(payments), places: 4)) : nil
            let money = DecimalText.parse(gross) ?? 0
            refundRateByAmount = money > 0
                ? DecimalText.format(ProceedsRules.rounded((DecimalText.parse(refunded) ?? 0) / money, places: 4)) : nil
        }
    }

    /// Net revenue (money taken less money given back) of the users whose first payment was in
    /// `cohort`, in the `monthsSince`-th month after it (0: the cohort's own month).
    public struct CohortCell: Sendable, Hashable, Codable {
        public let cohort: String
        public let monthsSince: Int
        public let currency: String
        public let users: Int
        public let net: String

        public init(cohort: String, monthsSince: Int, currency: String, users: Int, net: String) {
            self.cohort = cohort
            self.monthsSince = monthsSince
            self.currency = currency
            self.users = users
            self.net = net
        }
    }

    public let app: String
    public let environment: String
    /// `day` or `month`.
    public let interval: String
    public let timeZone: String
    public let from: Date
    public let to: Date
    /// The instant the figures reflect: facts recorded up to it, none after.
    public let asOf: Date
    public let subscriptions: [SubscriptionMetrics.Figures]
    public let refunds: [Refunds]
    public let cohorts: [CohortCell]
    /// The figures in one reporting currency, when one was asked for (`reportingCurrency`).
    public var converted: Converted?
}

/// Where the metrics read the audit trail. An `asOf` instant reads the rows recorded up to it; none
/// reads the audit trail as it stands, adding up its judgements.
public protocol MetricsReads: Sendable {
    /// The app's auto-renewable payment rows that started before `to`, recorded up to `asOf`
    /// (refunds counted only when recorded up to it).
    func subscriptionRows(app: String, environment: StoreEnvironment, before to: Date, asOf: Date) async throws -> [SubscriptionRow]
    /// The audit trail's subscription rows that started before `to`, as it stands, counted in groups
    /// bucketed by `points`; `asOf` is the instant churn and expiry are judged at.
    func serviceGroups(app: String, environment: StoreEnvironment, points: [Date], before to: Date, asOf: Date) async throws
        -> [SubscriptionMetrics.ServiceGroup]
    /// Payments and refunds occurring in [from, to), per interval and currency.
    func refunds(app: String, environment: StoreEnvironment, from: Date, to: Date, intervals: [SubscriptionMetrics.Interval], asOf: Date?)
        async throws -> [MetricsReport.Refunds]
    /// Net revenue per cohort of first payment (months in `timeZone`), month since it, and currency.
    func cohorts(app: String, environment: StoreEnvironment, to: Date, timeZone: String, asOf: Date?) async throws -> [MetricsReport.CohortCell]
}

/// Reads the metrics of an app.
public struct ReadMetrics: Sendable {
    /// Longest range of daily figures.
    public static let maximumDays = 400

    let reads: any MetricsReads
    let reader: UserStreamReader
    let directory: any AppDirectory
    let periods: ClosePeriods?
    let rates: (any ExchangeRateStore)?

    public init(reads: any MetricsReads, reader: UserStreamReader, directory: any AppDirectory, periods: ClosePeriods? = nil,
                rates: (any ExchangeRateStore)? = nil) {
        self.reads = reads
        self.reader = reader
        self.directory = directory
        self.periods = periods
        self.rates = rates
    }

    public func metrics(app: String, environment: StoreEnvironment, from: Date, to: Date, byMonth: Bool, timeZone: String = "UTC",
                        asOf given: Date? = nil, reportingCurrency: String? = nil) async throws -> MetricsReport {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        guard let zone = TimeZone(identifier: timeZone) else {
            throw AccessError.invalidInput("time zone '\(timeZone)' is not an IANA name such as UTC or Europe/Paris")
        }
        if let reportingCurrency, reportingCurrency.range(of: "^[A-Z]{3}$", options: .regularExpression) == nil {
            throw AccessError.invalidInput("reporting currency '\(reportingCurrency)' is not an ISO 4217 code such as EUR")
        }
        let report = try await metrics(app: app, environment: environment, from: from, to: to, byMonth: byMonth, timeZone: timeZone, zone: zone,
                                       asOf: given)
        guard let reportingCurrency else { return report }
        let known = try await rates?.rates(into: reportingCurrency) ?? []
        let intervals = SubscriptionMetrics.intervals(from: from, to: to, byMonth: byMonth, timeZone: zone, until: report.asOf)
        return report.converting(into: reportingCurrency, rates: known, intervals: intervals, zone: zone)
    }

    private func metrics(app: String, environment: StoreEnvironment, from: Date, to: Date, byMonth: Bool, timeZone: String, zone: TimeZone,
                         asOf given: Date?) async throws -> MetricsReport {
        guard from < to else { throw AccessError.invalidInput("from must be before to: the period is [from, to)") }
        let now = Date()
        let asOf = min(given ?? now, now)
        guard byMonth || SubscriptionMetrics.intervals(from: from, to: to, byMonth: false, timeZone: zone).count <= Self.maximumDays else {
            throw AccessError.invalidInput("daily metrics cover at most \(Self.maximumDays) days: ask for monthly ones (interval=month) or a shorter period")
        }
        let request = Request(app: app, environment: environment, from: from, to: to, byMonth: byMonth, timeZone: timeZone,
                              intervals: SubscriptionMetrics.intervals(from: from, to: to, byMonth: byMonth, timeZone: zone, until: asOf), asOf: asOf)
        // A past instant rebuilds each subscription from the rows recorded by then; the present adds
        // up the audit trail's judgements, which follow every fact as it is recorded (and, while a new
        // version of the audit trail that keeps them is still being built, is rebuilt as the past is).
        if let given, given < now { return try await report(request, past: true) }
        do {
            return try await report(request, past: false)
        } catch let error as AuditQueryError where error == .notReady {
            return try await report(request, past: true)
        }
    }

    struct Request {
        let app: String
        let environment: StoreEnvironment
        let from: Date
        let to: Date
        let byMonth: Bool
        let timeZone: String
        let intervals: [SubscriptionMetrics.Interval]
        let asOf: Date
    }

    private func report(_ request: Request, past: Bool) async throws -> MetricsReport {
        let (app, environment, to, asOf, intervals) = (request.app, request.environment, request.to, request.asOf, request.intervals)
        async let catalog = reader.catalog(app: app)
        async let refunds = reads.refunds(app: app, environment: environment, from: request.from, to: to, intervals: intervals,
                                          asOf: past ? asOf : nil)
        async let cohorts = reads.cohorts(app: app, environment: environment, to: to, timeZone: request.timeZone, asOf: past ? asOf : nil)
        let products = try await catalog
        let monthsOf = { (productId: String) in SubscriptionMetrics.months(of: products.products[productId]?.duration) }
        var figures: [SubscriptionMetrics.Figures] = []
        if past, !intervals.isEmpty {
            let rows = try await reads.subscriptionRows(app: app, environment: environment, before: to, asOf: asOf)
            figures = SubscriptionMetrics.compute(rows, intervals: intervals, asOf: asOf, monthsOf: monthsOf)
        } else if !intervals.isEmpty {
            let groups = try await reads.serviceGroups(app: app, environment: environment, points: SubscriptionMetrics.points(of: intervals),
                                                       before: to, asOf: asOf)
            figures = SubscriptionMetrics.assemble(groups, intervals: intervals, monthsOf: monthsOf)
        }
        var money = try await refunds
        if request.byMonth, !past { money = try await closedMonths(money, request) }
        return MetricsReport(app: app, environment: environment.rawValue, interval: request.byMonth ? "month" : "day", timeZone: request.timeZone,
                             from: request.from, to: to, asOf: asOf, subscriptions: figures, refunds: money, cohorts: try await cohorts)
    }

    /// The money of the months closed in the report's time zone, whole in it, from their closes'
    /// figures plus the adjustments booked since: what finance reported, and what changed it.
    private func closedMonths(_ live: [MetricsReport.Refunds], _ request: Request) async throws -> [MetricsReport.Refunds] {
        guard let periods else { return live }
        let months = Dictionary(uniqueKeysWithValues: request.intervals.map { ($0.label, $0) })
        let closed = try await periods.statuses(app: request.app).filter { status in
            status.state == .closed && status.timeZone == request.timeZone && months[status.period].map { $0.start == status.from && $0.end == status.to } == true
        }
        guard !closed.isEmpty else { return live }
        var result = live.filter { row in !closed.contains { $0.period == row.interval } }
        for status in closed {
            struct Money { var payments = 0, refunds = 0, gross: Decimal = 0, refunded: Decimal = 0, adjustments = 0 }
            var byCurrency: [String: Money] = [:]
            for figure in status.figures where figure.environment == request.environment {
                guard let currency = figure.currency else { continue }
                byCurrency[currency, default: Money()].payments += figure.purchases
                byCurrency[currency, default: Money()].refunds += figure.refunds
                byCurrency[currency, default: Money()].gross += DecimalText.parse(figure.gross) ?? 0
                byCurrency[currency, default: Money()].refunded += DecimalText.parse(figure.refundedAmount) ?? 0
            }
            for adjustment in try await periods.adjustments(app: request.app, period: status.period) where adjustment.environment == request.environment {
                guard let currency = adjustment.currency else { continue }
                let count = (adjustment.amountAfter == nil && adjustment.quantityAfter == nil ? 0 : 1)
                    - (adjustment.amountBefore == nil && adjustment.quantityBefore == nil ? 0 : 1)
                let amount = (DecimalText.parse(adjustment.amountAfter) ?? 0) - (DecimalText.parse(adjustment.amountBefore) ?? 0)
                var value = byCurrency[currency] ?? Money()
                if adjustment.event == "refund" { value.refunds += count; value.refunded += amount } else { value.payments += count; value.gross += amount }
                value.adjustments += 1
                byCurrency[currency] = value
            }
            for (currency, value) in byCurrency {
                result.append(.init(interval: status.period, currency: currency, payments: value.payments, refunds: value.refunds,
                                    gross: DecimalText.format(value.gross), refunded: DecimalText.format(value.refunded), basis: .closed,
                                    closedAt: status.closedAt, adjustments: value.adjustments))
            }
        }
        return result.sorted { ($0.interval, $0.currency) < ($1.interval, $1.currency) }
    }
}
