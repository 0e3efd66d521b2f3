import Foundation
import LedgerDomain

/// The fold's judgement of a user's paid subscription service, which the audit trail keeps on its
/// rows so that the subscription metrics add rows up instead of rebuilding each subscription's
/// history at every request (docs/finance.md#subscription-metrics has the definitions).
///
/// A subscription is one original transaction of an auto-renewable product in one environment.
/// Its paid periods (money taken, not a free trial, not refunded, with an expiry), in order of
/// start, make stretches of paid service: a period starting more than `continuity` after every
/// earlier one ended opens a new stretch. A period in a billing grace period (the App Store still
/// retrying the renewal's charge, the customer keeping access) ends when the grace period does. Each paid period says how it moved the subscription
/// (`Movement`), until when it is the subscription's current period, and, the last of its stretch,
/// when the stretch ends. A free trial says when the paid period that converted it started.
public enum SubscriptionService {
    /// Gaps up to a day between paid periods are continuous service (a renewal charged a little late).
    public static let continuity: TimeInterval = 86_400

    /// How a row moved its subscription.
    public enum Movement: String, Hashable, Sendable, CaseIterable {
        /// A free trial period.
        case trial
        /// The first paid period of the subscription's first stretch.
        case new
        /// The first paid period of a later stretch: the subscriber came back after a lapse.
        case reactivated
        /// A later period of a stretch, for the same product or one the App Store does not mark.
        case renewed
        /// A later period the App Store marks as an upgrade or a crossgrade.
        case upgraded
        case crossgraded
        /// A renewal (not marked as upgrade or crossgrade) into another product than the period before.
        case downgraded
    }

    public struct Judgement: Hashable, Sendable {
        public let movement: Movement
        /// Paid periods: the end of the time during which this period is the subscription's current
        /// one, from its start exclusive: the next period's start within the stretch, else the
        /// stretch's end.
        public var currentUntil: Date?
        /// The last paid period of a stretch: when the stretch ends.
        public var serviceEnds: Date?
        /// Free trials: when the paid period that converted the trial started (within `continuity`
        /// of the trial's end).
        public var convertedAt: Date?
    }

    /// The judgement of each auto-renewable payment of a user, by transaction id; transactions that
    /// are neither a paid period nor a free trial (refunded, unpriced, another product type) have none.
    /// `graceUntil`: periods the App Store's billing grace period extends (by transaction id), whose
    /// service runs until the grace period ends.
    public static func judge(_ transactions: [UserLedger.Transaction], graceUntil: [String: Date] = [:]) -> [String: Judgement] {
        struct Subscription: Hashable { let environment: StoreEnvironment; let original: String }
        let candidates = transactions.filter { $0.kind.isPayment && $0.productType == .autoRenewable && !$0.isFamilyShared }
        var judgements: [String: Judgement] = [:]
        for (_, subscription) in Dictionary(grouping: candidates, by: { Subscription(environment: $0.environment, original: $0.originalTransactionId) }) {
            let ordered = subscription.sorted { ($0.purchaseDate, $0.expiresDate ?? $0.purchaseDate, $0.position) < ($1.purchaseDate, $1.expiresDate ?? $1.purchaseDate, $1.position) }
            let paid = ordered.filter(isPaidPeriod)
            var reach: Date?  // the latest end of the periods so far
            var stretches = 0
            for (index, period) in paid.enumerated() {
                let end = max(period.expiresDate!, graceUntil[period.transactionId] ?? .distantPast)
                let movement: Movement
                if let before = reach, period.purchaseDate <= before.addingTimeInterval(continuity) {
                    switch period.kind {
                    case .upgrade: movement = .upgraded
                    case .crossgrade: movement = .crossgraded
                    default: movement = period.productId == paid[index - 1].productId ? .renewed : .downgraded
                    }
                } else {
                    movement = stretches == 0 ? .new : .reactivated
                    stretches += 1
                }
                reach = max(reach ?? end, end)
                var judgement = Judgement(movement: movement)
                if index + 1 < paid.count, paid[index + 1].purchaseDate <= reach!.addingTimeInterval(continuity) {
                    judgement.currentUntil = paid[index + 1].purchaseDate
                } else {
                    judgement.currentUntil = reach
                    judgement.serviceEnds = reach
                }
                judgements[period.transactionId] = judgement
            }
            for trial in ordered where trial.offer == .freeTrial {
                var judgement = Judgement(movement: .trial)
                if let end = trial.expiresDate {
                    judgement.convertedAt = paid.first { $0.purchaseDate >= trial.purchaseDate && $0.purchaseDate <= end.addingTimeInterval(continuity) }?
                        .purchaseDate
                }
                judgements[trial.transactionId] = judgement
            }
        }
        return judgements
    }

    /// A paid period: money taken (an amount above zero), not a free trial, not refunded, with an expiry.
    static func isPaidPeriod(_ transaction: UserLedger.Transaction) -> Bool {
        guard transaction.offer != .freeTrial, !transaction.isRevoked, transaction.expiresDate != nil, let amount = transaction.amount,
              let value = Decimal(string: amount, locale: Locale(identifier: "en_US_POSIX")) else { return false }
        return value > 0
    }
}
