import Foundation
import LedgerDomain
import LedgerProjections

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
    /// The row's log position: the order of periods starting and ending together.
    public let position: Int64
    /// When the billing grace period extending the period ends (the App Store retrying its renewal's charge).
    public let graceUntil: Date?

    public init(userId: String, originalTransactionId: String, productId: String, event: String, offer: String, start: Date, end: Date?,
                amount: Decimal?, currency: String?, revoked: Bool, position: Int64, graceUntil: Date? = nil) {
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
        self.position = position
        self.graceUntil = graceUntil
    }

    var isTrial: Bool { offer == "free_trial" }
    /// Where the period's service ends: its expiry, or the end of a billing grace period past it.
    var serviceEnd: Date? { end.map { max($0, graceUntil ?? $0) } }
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
/// `churned` at its end. Active at an instant t: inside a stretch, start < t ≤ end. MRR at an
/// instant: each active subscription's current period (the last to start before it) normalised to
/// a month by its product's duration. Free trials: started at their start, converted when a paid
/// period follows within `continuity` (counted when it starts, in the trial's currency), expired
/// at their end otherwise. Family members' access takes no money and has no row. Events count in
/// the interval holding them, up to the metrics' instant.
///
/// Two ways lead to the same figures: `assemble` adds up the groups the database counts from the
/// audit trail's judgements (`SubscriptionService`, the current state), and `compute` rebuilds
/// each subscription from its rows recorded up to a past instant.
public enum SubscriptionMetrics {
    /// Gaps up to a day between paid periods are continuous service (a renewal charged a little late).
    public static let continuity = SubscriptionService.continuity
    /// Before any payment through the App Store: 2008-01-01 (it opened in July 2008).
    public static let appStoreOpened = Date(timeIntervalSince1970: 1_199_145_600)

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
        var end: Date { periods.map { $0.serviceEnd! }.max()! }
    }

    /// The figures of every interval and currency (currencies with nothing in an interval left out).
    public static func compute(
        _ rows: [SubscriptionRow], intervals: [Interval], asOf: Date, monthsOf: (String) -> Decimal?
    ) -> [Figures] {
        var figures: [String: [String: Figures]] = [:]  // label → currency → figures
        func bump(_ date: Date, _ currency: String?, _ change: (inout Figures) -> Void) {
            guard date < asOf, let interval = locate(date, in: intervals) else { return }
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
            let ordered = subscription.sorted { ($0.start, $0.end ?? $0.start, $0.position) < ($1.start, $1.end ?? $1.start, $1.position) }
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
                    if interval.start < asOf, stretchStart < interval.start, interval.start <= stretchEnd,
                       let current = stretch.periods.last(where: { $0.start < interval.start }) {
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
                    bump(paid.start, trial.currency) { $0.trialsConverted += 1 }
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
        return finish(figures, mrr: mrr, intervals: intervals)
    }

    /// Rows of subscription service alike in judgement, currency and product, and in where their
    /// instants fall among the points (`points(of:)`): bucket k holds the instants at or after the
    /// k-th point and before the next, so buckets 1 to n are the n intervals. Counted by the
    /// database from the audit trail's judgements.
    public struct ServiceGroup: Sendable, Hashable {
        public let movement: SubscriptionService.Movement
        public let currency: String
        public let productId: String
        /// The bucket of the period's start.
        public let start: Int
        /// Paid periods: the bucket of the end of their time as the current period.
        public let currentUntil: Int?
        /// Stretches that ended by the metrics' instant: the bucket of their end.
        public let churned: Int?
        /// Trials: the bucket of the paid start that converted them, or of their end when they expired.
        public let converted: Int?
        public let expired: Int?
        public let rows: Int
        public let amount: Decimal

        public init(movement: SubscriptionService.Movement, currency: String, productId: String, start: Int, currentUntil: Int?, churned: Int?,
                    converted: Int?, expired: Int?, rows: Int, amount: Decimal) {
            self.movement = movement
            self.currency = currency
            self.productId = productId
            self.start = start
            self.currentUntil = currentUntil
            self.churned = churned
            self.converted = converted
            self.expired = expired
            self.rows = rows
            self.amount = amount
        }
    }

    /// The instants the groups are bucketed by: each interval's start, then the last one's end.
    public static func points(of intervals: [Interval]) -> [Date] {
        intervals.map(\.start) + (intervals.last.map { [$0.end] } ?? [])
    }

    /// The figures of every interval and currency from the database's groups.
    public static func assemble(_ groups: [ServiceGroup], intervals: [Interval], monthsOf: (String) -> Decimal?) -> [Figures] {
        let count = intervals.count
        var figures: [String: [String: Figures]] = [:]
        func change(_ bucket: Int?, _ currency: String, _ body: (inout Figures) -> Void) {
            guard let bucket, bucket >= 1, bucket <= count else { return }
            let label = intervals[bucket - 1].label
            var value = figures[label]?[currency] ?? Figures(interval: label, currency: currency)
            body(&value)
            figures[label, default: [:]][currency] = value
        }
        // A paid period is current at the points after its start's bucket up to its end's: it adds
        // to the active subscriptions (and their amounts) from one point and takes back from another.
        struct Recurring: Hashable { let currency: String; let product: String }
        var active: [Recurring: [Int]] = [:]
        var amounts: [Recurring: [Decimal]] = [:]
        for group in groups {
            let rows = group.rows
            switch group.movement {
            case .trial:
                change(group.start, group.currency) { $0.trialsStarted += rows }
                change(group.converted, group.currency) { $0.trialsConverted += rows }
                change(group.expired, group.currency) { $0.trialsExpired += rows }
                continue
            case .new: change(group.start, group.currency) { $0.new += rows }
            case .reactivated: change(group.start, group.currency) { $0.reactivated += rows }
            case .renewed: change(group.start, group.currency) { $0.renewed += rows }
            case .upgraded: change(group.start, group.currency) { $0.upgraded += rows }
            case .crossgraded: change(group.start, group.currency) { $0.crossgraded += rows }
            case .downgraded: change(group.start, group.currency) { $0.renewed += rows; $0.downgraded += rows }
            }
            change(group.churned, group.currency) { $0.churned += rows }
            guard let until = group.currentUntil, until > group.start, group.start <= count else { continue }
            let key = Recurring(currency: group.currency, product: group.productId)
            active[key, default: Array(repeating: 0, count: count + 3)][max(group.start, 0) + 1] += rows
            active[key]![min(until, count + 1) + 1] -= rows
            amounts[key, default: Array(repeating: 0, count: count + 3)][max(group.start, 0) + 1] += group.amount
            amounts[key]![min(until, count + 1) + 1] -= group.amount
        }
        var mrr: [String: [String: Decimal]] = [:]
        for (key, changes) in active {
            let months = monthsOf(key.product)
            var subscriptions = 0
            var amount: Decimal = 0
            for point in 1...(count + 1) {
                subscriptions += changes[point]
                amount += amounts[key]![point]
                guard subscriptions != 0 else { continue }
                change(point, key.currency) { $0.activeAtStart += subscriptions }
                guard point >= 2 else { continue }
                change(point - 1, key.currency) { $0.activeAtEnd += subscriptions }
                if let months { mrr[intervals[point - 2].label, default: [:]][key.currency, default: 0] += amount / months }
            }
        }
        return finish(figures, mrr: mrr, intervals: intervals)
    }

    /// The figures in the intervals' order, currencies in theirs, with MRR and churn rates.
    static func finish(_ figures: [String: [String: Figures]], mrr: [String: [String: Decimal]], intervals: [Interval]) -> [Figures] {
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

    /// Days or months from `from` to `to` in a time zone, cut at `until`: none starts at or after
    /// it, and the last ends at it (or at `to`) if it falls inside.
    public static func intervals(from: Date, to: Date, byMonth: Bool, timeZone: TimeZone, until: Date) -> [Interval] {
        let end = min(to, until)
        var result = intervals(from: from, to: end, byMonth: byMonth, timeZone: timeZone)
        if let last = result.last, last.end > end { result[result.count - 1] = Interval(label: last.label, start: last.start, end: end) }
        return result
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
