import Foundation

/// Which kind of subscription paid for a period.
public enum SubscriptionKind: String, Hashable, Sendable, Codable, CaseIterable {
    /// Bought for a fixed duration; the ledger stacks and restores these periods itself.
    case nonRenewing = "non_renewing"
    /// Renewed by the App Store; each transaction's period ends at its `expires_date`.
    case autoRenewable = "auto_renewable"
}

/// A stretch of time a user paid a subscription for: `[start, end)`.
public struct SubscriptionPeriod: Hashable, Sendable, Codable {
    public let transactionId: String
    public let productId: String
    public let group: String
    public let kind: SubscriptionKind
    public let start: Date
    public let end: Date

    public init(transactionId: String, productId: String, group: String, kind: SubscriptionKind, start: Date, end: Date) {
        self.transactionId = transactionId
        self.productId = productId
        self.group = group
        self.kind = kind
        self.start = start
        self.end = end
    }

    /// Active at `instant`, compared at millisecond precision: answered at read time, never stored
    /// as a flag that goes stale.
    public func isActive(at instant: Date) -> Bool {
        Self.covers(start: start, end: end, instant)
    }

    /// Whether `[start, end)` covers `instant`, in whole milliseconds: the one comparison of an
    /// instant with a period's edges.
    public static func covers(start: Date, end: Date, _ instant: Date) -> Bool {
        let at = instant.milliseconds
        return start.milliseconds <= at && at < end.milliseconds
    }
}

/// One purchase of a non-renewing subscription, as the stacking needs it.
public struct NonRenewingPurchase: Hashable, Sendable {
    public let transactionId: String
    public let productId: String
    public let group: String
    public let purchaseDate: Date
    public let duration: ISODuration
}

/// The periods non-renewing purchases give.
///
/// Within a subscription group, purchases stack in purchase order: each starts at the later of
/// its purchase date and the end of the group's previous period, and lasts its duration. Periods
/// that follow each other without a gap form a chain; within a run of durations in the same unit
/// (months and years, or weeks and days) every end is computed from the run's start (start + P1M,
/// start + 2 × P1M, …), never from the previous end, so twelve months bought on January 31 end on
/// January 31 of the next year instead of drifting to the 28th. A duration in another unit starts
/// a run of its own where the previous period ends, so a month bought after a week from February
/// 22 runs from March 1 to April 1. Revoked purchases are left out before stacking, so the
/// periods after a refunded one move up. The result depends only on the set of purchases, not on
/// the order they arrive in.
public enum NonRenewingSchedule {
    /// A group's unbroken run of periods so far: where it started, how long it lasts, where it ends.
    private struct Chain {
        /// Where the current run of same-unit durations started.
        let start: Date
        var length: ISODuration
        var end: Date
    }

    public static func periods(
        of purchases: some Sequence<NonRenewingPurchase>,
        revoked: Set<String> = []
    ) -> [SubscriptionPeriod] {
        let live = purchases
            .filter { !revoked.contains($0.transactionId) }
            .sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
        var chains: [String: Chain] = [:]
        var periods: [SubscriptionPeriod] = []
        var seen = Set<String>()
        for purchase in live where seen.insert(purchase.transactionId).inserted {
            var chain = chains[purchase.group]
                .flatMap { $0.end.milliseconds >= purchase.purchaseDate.milliseconds ? $0 : nil }
                ?? Chain(start: purchase.purchaseDate, length: ISODuration(), end: purchase.purchaseDate)
            let start = chain.end
            if !chain.length.isZero, !chain.length.hasSameUnit(as: purchase.duration) {
                chain = Chain(start: chain.end, length: ISODuration(), end: chain.end)
            }
            chain.length = chain.length + purchase.duration
            chain.end = chain.length.added(to: chain.start)
            chains[purchase.group] = chain
            periods.append(SubscriptionPeriod(
                transactionId: purchase.transactionId, productId: purchase.productId,
                group: purchase.group, kind: .nonRenewing, start: start, end: chain.end
            ))
        }
        return periods
    }
}
