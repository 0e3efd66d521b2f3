import Foundation
import LedgerDomain

/// One auto-renewable row of the audit trail, as the metrics read it.
public struct SubscriptionRow: Sendable, Hashable {
    public let userId: String
    public let originalTransactionId: String
    public let productId: String
    /// purchase, renewal, upgrade or crossgrade.
    public let event: String
    /// none, free_trial or intro_offer.
    public let offer: String
    public let start: Date
    public let end: Date?
    /// The row's money (Apple's whole amount), nil when unpriced.
    public let amount: Decimal?
    public let currency: String?
    /// Refunded or revoked by a fact recorded up to the metrics' instant.
    public let revoked: Bool

    public init(userId: String, originalTransactionId: String, productId: String, event: String, offer: String, start: Date, end: Date?,
                amount: Decimal?, currency: String?, revoked: Bool) {
        self.userId = userId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.event = event
        self.offer = offer
        self.start = start
        self.end = end
        self.amount = amount
        self.currency = currency
        self.revoked = revoked
    }

    var isTrial: Bool { offer == "free_trial" }
    var isPaid: Bool { !isTrial && !revoked && (amount ?? 0) > 0 && end != nil }
}

/// The figures of a subscription business, per interval and currency, from the audit trail's
/// auto-renewable rows: one definition per figure (docs/finance.md#subscription-metrics).
///
/// A subscription is one user's original transaction. Its paid periods (priced, not a free trial,
/// not refunded) that follow each other within `continuity` make one stretch of paid service: the
/// first stretch starts `new`, a later one `reactivated`; each later period of a stretch is
/// `renewed` (an upgrade or crossgrade is counted as such, and a renewal into another product as a
/// downgrade); a stretch that ended (more than `continuity` before the metrics' instant) is
/// `churned` at its end. Active at an instant: inside a stretch. MRR at an instant: each active
/// subscription's current period's amount normalised to a month by its product's duration. Free
/// trials: started at their start, converted when a paid period follows within `continuity`,
/// expired at their end otherwise. Family members' access takes no money and has no row.
public enum SubscriptionMetrics {
    /// Gaps up to a day between paid periods are continuous service (a renewal charged a little late).
    public static let continuity: TimeInterval = 86_400

    /// The figures of one interval in one currency.
    public struct Figures: Sendable, Hashable, Codable {
        public let interval: String
        public let currency: String
        /// Monthly recurring revenue at the interval's end (or the metrics' instant, if earlier).
        public var mrr = "0"
        public var activeAtStart = 0
        public var activeAtEnd = 0
        public var new = 0
        public var renewed = 0
        public var reactivated = 0
        public var churned = 0
        public var upgraded = 0
        public var crossgraded = 0
        public var downgraded = 0
        /// churned / activeAtStart, nil when none was active.
        public var churnRate: String?
        public var trialsStarted = 0
        public var trialsConverted = 0
        public var trialsExpired = 0

        init(interval: String, currency: String) {
            self.interval = interval
            self.currency = currency
        }
    }

    /// Buckets `[start, end)` with their labels.
    public struct Interval: Sendable, Hashable {
        public let label: String
        public let start: Date
        public let end: Date

        public init(label: String, start: Date, end: Date) {
            self.label = label
            self.start = start
            self.end = end
        }
    }

    struct Stretch {
        var periods: [SubscriptionRow]
        var start: Date { periods[0].start }
        var end: Date { periods.map { $0.end! }.max()! }
    }

    /// The figures of every interval and currency (currencies with nothing in an interval left out).
    public static func compute(
        _ rows: [SubscriptionRow], intervals: [Interval], asOf: Date, monthsOf: (String) -> Decimal?
    ) -> [Figures] {
        var figures: [String: [String: Figures]] = [:]  // label → currency → figures
        func bump(_ date: Date, _ currency: String?, _ change: (inout Figures) -> Void) {
            guard date <= asOf, let interval = locate(date, in: intervals) else { return }
            let key = currency ?? "none"
            var value = figures[interval.label]?[key] ?? Figures(interval: interval.label, currency: key)
            change(&value)
            figures[interval.label, default: [:]][key] = value
        }
        // Amounts per interval, currency and product, divided by the product's months once at the end.
        struct Recurring: Hashable { let interval: String; let currency: String; let product: String }
        var recurring: [Recurring: Decimal] = [:]
        struct Key: Hashable { let user: String; let original: String }
        for (_, subscription) in Dictionary(grouping: rows, by: { Key(user: $0.userId, original: $0.originalTransactionId) }) {
            let ordered = subscription.sorted { ($0.start, $0.end ?? $0.start) < ($1.start, $1.end ?? $1.start) }
            var stretches: [Stretch] = []
            for period in ordered where period.isPaid {
                if var last = stretches.last, period.start <= last.end.addingTimeInterval(continuity) {
                    last.periods.append(period)
                    stretches[stretches.count - 1] = last
                } else {
                    stretches.append(Stretch(periods: [period]))
                }
            }
            for (index, stretch) in stretches.enumerated() {
                let first = stretch.periods[0]
                bump(first.start, first.currency) { if index == 0 { $0.new += 1 } else { $0.reactivated += 1 } }
                for (previous, period) in zip(stretch.periods, stretch.periods.dropFirst()) {
                    bump(period.start, period.currency) { figures in
                        switch period.event {
                        case "upgrade": figures.upgraded += 1
                        case "crossgrade": figures.crossgraded += 1
                        default:
                            figures.renewed += 1
                            if period.productId != previous.productId { figures.downgraded += 1 }
                        }
                    }
                }
                if stretch.end.addingTimeInterval(continuity) < asOf {
                    bump(stretch.end, stretch.periods.last!.currency) { $0.churned += 1 }
                }
                // Active (and MRR) just before each interval's end, and at its start, inside the stretch.
                let (stretchStart, stretchEnd) = (stretch.start, stretch.end)
                var cursor = firstIndex(intervals) { $0.end > stretchStart }
                while cursor < intervals.count, intervals[cursor].start <= stretchEnd {
                    let interval = intervals[cursor]
                    cursor += 1
                    let atEnd = min(interval.end, asOf)
                    if stretchStart < atEnd, atEnd <= stretchEnd, let current = stretch.periods.last(where: { $0.start < atEnd }) {
                        let currency = current.currency ?? "none"
                        var value = figures[interval.label]?[currency] ?? Figures(interval: interval.label, currency: currency)
                        value.activeAtEnd += 1
                        figures[interval.label, default: [:]][currency] = value
                        if let amount = current.amount {
                            recurring[Recurring(interval: interval.label, currency: currency, product: current.productId), default: 0] += amount
                        }
                    }
                    if interval.start <= asOf, stretchStart <= interval.start, interval.start < stretchEnd,
                       let current = stretch.periods.last(where: { $0.start <= interval.start }) {
                        let currency = current.currency ?? "none"
                        var value = figures[interval.label]?[currency] ?? Figures(interval: interval.label, currency: currency)
                        value.activeAtStart += 1
                        figures[interval.label, default: [:]][currency] = value
                    }
                }
            }
            // Free trials.
            for trial in ordered where trial.isTrial {
                bump(trial.start, trial.currency) { $0.trialsStarted += 1 }
                guard let end = trial.end else { continue }
                if let paid = ordered.first(where: { $0.isPaid && $0.start >= trial.start && $0.start <= end.addingTimeInterval(continuity) }) {
                    bump(paid.start, paid.currency) { $0.trialsConverted += 1 }
                } else if end.addingTimeInterval(continuity) < asOf {
                    bump(end, trial.currency) { $0.trialsExpired += 1 }
                }
            }
        }
        var mrr: [String: [String: Decimal]] = [:]
        for (key, amount) in recurring {
            guard let months = monthsOf(key.product) else { continue }
            mrr[key.interval, default: [:]][key.currency, default: 0] += amount / months
        }
        var result: [Figures] = []
        for interval in intervals {
            for (currency, var value) in (figures[interval.label] ?? [:]).sorted(by: { $0.key < $1.key }) {
                value.mrr = DecimalText.format(ProceedsRules.rounded(mrr[interval.label]?[currency] ?? 0, places: 2))
                if value.activeAtStart > 0 {
                    value.churnRate = DecimalText.format(ProceedsRules.rounded(Decimal(value.churned) / Decimal(value.activeAtStart), places: 4))
                }
                result.append(value)
            }
        }
        return result
    }

    /// The first index whose element satisfies a predicate that is false, then true, along the array.
    static func firstIndex(_ intervals: [Interval], where predicate: (Interval) -> Bool) -> Int {
        var low = 0, high = intervals.count
        while low < high {
            let middle = (low + high) / 2
            if predicate(intervals[middle]) { high = middle } else { low = middle + 1 }
        }
        return low
    }

    static func locate(_ date: Date, in intervals: [Interval]) -> Interval? {
        var low = 0, high = intervals.count - 1
        while low <= high {
            let middle = (low + high) / 2
            if date < intervals[middle].start { high = middle - 1 } else if date >= intervals[middle].end { low = middle + 1 } else { return intervals[middle] }
        }
        return nil
    }

    /// A product duration in months (a year 12, a week 7/30.436875), nil without one.
    public static func months(of duration: ISODuration?) -> Decimal? {
        guard let duration else { return nil }
        let dayMonth = Decimal(string: "30.436875")!
        let months = Decimal(duration.years * 12 + duration.months) + Decimal(duration.weeks * 7 + duration.days) / dayMonth
        return months > 0 ? months : nil
    }

    /// Days or months from `from` to `to` in a time zone.
    public static func intervals(from: Date, to: Date, byMonth: Bool, timeZone: TimeZone) -> [Interval] {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        var start = byMonth ? calendar.date(from: calendar.dateComponents([.year, .month], from: from))! : calendar.startOfDay(for: from)
        var result: [Interval] = []
        while start < to {
            let end = calendar.date(byAdding: byMonth ? .month : .day, value: 1, to: start)!
            let parts = calendar.dateComponents([.year, .month, .day], from: start)
            let label = byMonth ? String(format: "%04d-%02d", parts.year!, parts.month!) : String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
            result.append(Interval(label: label, start: start, end: end))
            start = end
        }
        return result
    }
}
