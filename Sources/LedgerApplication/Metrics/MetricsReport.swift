import Foundation
import LedgerDomain

/// What `GET /v1/audit/metrics` and `ledger audit metrics` answer: the subscription figures, the
/// refund rates and the cohort table of an app, per interval and currency (never added across
/// currencies), as the log stood at `asOf`.
public struct MetricsReport: Sendable, Hashable, Codable {
    /// Money taken and given back in one interval and currency, all product types.
    public struct Refunds: Sendable, Hashable, Codable {
        public let interval: String
        public let currency: String
        public let payments: Int
        public let refunds: Int
        public let gross: String
        public let refunded: String
        /// refunds / payments, and refunded / gross; nil when there were none.
        public let refundRateByCount: String?
        public let refundRateByAmount: String?

        public init(interval: String, currency: String, payments: Int, refunds: Int, gross: String, refunded: String) {
            self.interval = interval
            self.currency = currency
            self.payments = payments
            self.refunds = refunds
            self.gross = gross
            self.refunded = refunded
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
}

/// Where the metrics read the audit trail.
public protocol MetricsReads: Sendable {
    /// The app's auto-renewable payment rows that started before `to`, recorded up to `asOf`
    /// (refunds counted only when recorded up to it).
    func subscriptionRows(app: String, environment: StoreEnvironment, before to: Date, asOf: Date) async throws -> [SubscriptionRow]
    /// Payments and refunds per interval (`month`: yyyy-MM, else yyyy-MM-dd, in `timeZone`) and currency.
    func refunds(app: String, environment: StoreEnvironment, from: Date, to: Date, byMonth: Bool, timeZone: String, asOf: Date) async throws
        -> [MetricsReport.Refunds]
    /// Net revenue per cohort of first payment (months in `timeZone`), month since it, and currency.
    func cohorts(app: String, environment: StoreEnvironment, to: Date, timeZone: String, asOf: Date) async throws -> [MetricsReport.CohortCell]
}

/// Reads the metrics of an app.
public struct ReadMetrics: Sendable {
    /// Longest range of daily figures.
    public static let maximumDays = 400

    let reads: any MetricsReads
    let reader: UserStreamReader
    let directory: any AppDirectory

    public init(reads: any MetricsReads, reader: UserStreamReader, directory: any AppDirectory) {
        self.reads = reads
        self.reader = reader
        self.directory = directory
    }

    public func metrics(app: String, environment: StoreEnvironment, from: Date, to: Date, byMonth: Bool, timeZone: String = "UTC",
                        asOf given: Date? = nil) async throws -> MetricsReport {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        guard let zone = TimeZone(identifier: timeZone) else {
            throw AccessError.invalidInput("time zone '\(timeZone)' is not an IANA name such as UTC or Europe/Paris")
        }
        guard from < to else { throw AccessError.invalidInput("from must be before to: the period is [from, to)") }
        let asOf = min(given ?? Date(), Date())
        let intervals = SubscriptionMetrics.intervals(from: from, to: to, byMonth: byMonth, timeZone: zone)
        guard byMonth || intervals.count <= Self.maximumDays else {
            throw AccessError.invalidInput("daily metrics cover at most \(Self.maximumDays) days: ask for monthly ones (interval=month) or a shorter period")
        }
        async let catalog = reader.catalog(app: app)
        async let rows = reads.subscriptionRows(app: app, environment: environment, before: to, asOf: asOf)
        async let refunds = reads.refunds(app: app, environment: environment, from: from, to: to, byMonth: byMonth, timeZone: timeZone, asOf: asOf)
        async let cohorts = reads.cohorts(app: app, environment: environment, to: to, timeZone: timeZone, asOf: asOf)
        let products = try await catalog
        let figures = SubscriptionMetrics.compute(try await rows, intervals: intervals, asOf: asOf) { productId in
            SubscriptionMetrics.months(of: products.products[productId]?.duration)
        }
        return MetricsReport(app: app, environment: environment.rawValue, interval: byMonth ? "month" : "day", timeZone: timeZone, from: from,
                             to: to, asOf: asOf, subscriptions: figures, refunds: try await refunds, cohorts: try await cohorts)
    }
}
