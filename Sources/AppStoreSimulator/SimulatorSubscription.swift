import AppStore
import Foundation
import LedgerDomain

/// One user's auto-renewable subscription in one group: the periods paid so far, and what the App
/// Store will do when the current one ends.
///
/// The periods are transactions in the store; this keeps what decides the next one. Period ends are
/// computed from the start of the current run of equal periods (`anchor`), as `anchor + n × duration`,
/// so that calendar months do not drift (Jan 31, Feb 28, Mar 31). A run starts at the purchase and
/// again wherever the plan changes or billing recovers.
struct SimulatorSubscription: Sendable {
    /// A product the subscription is on, with the duration of its periods.
    struct Plan: Hashable, Sendable {
        let productId: String
        let duration: SubscriptionDuration
    }

    /// Billing trouble set through the admin API: while it lasts, renewals fail. (Renewals due
    /// before it was set were made before, so it only touches periods that end later.)
    struct BillingIssue: Hashable, Sendable {
        /// The app's billing grace period: service goes on this long after a renewal fails.
        let gracePeriodDays: Int?
    }

    let originalTransactionId: String
    let userId: String
    let bundleId: String
    let group: String
    let groupIdentifier: String
    let originalPurchaseDate: Date

    /// The plan of the latest period.
    var plan: Plan
    /// The plan the next renewal switches to (a downgrade, or a crossgrade to another duration).
    var pendingPlan: Plan?
    var anchor: Date
    /// How many of `plan`'s periods the run covers up to the end of the latest period (a free trial
    /// or pay-up-front offer covers several at once).
    var periodsSinceAnchor: Int
    /// The payments in order: purchase, renewals, upgrades; never restores.
    var periodIds: [String] = []
    /// Renewals so far, for the sandbox's limit.
    var renewals = 0
    /// Pay-as-you-go periods still to be billed at the introductory price.
    var introPeriodsLeft = 0
    var autoRenewEnabled = true
    var billingIssue: BillingIssue?
    /// When support refunded one of its transactions: no renewal starts after this.
    var stoppedAt: Date?

    init(original: String, userId: String, bundleId: String, group: String, plan: Plan, at start: Date) {
        self.originalTransactionId = original
        self.userId = userId
        self.bundleId = bundleId
        self.group = group
        self.groupIdentifier = SimulatedProduct.groupIdentifier(group)
        self.originalPurchaseDate = start
        self.plan = plan
        self.anchor = start
        self.periodsSinceAnchor = 0
    }

    var latestId: String? { periodIds.last }

    /// The end of the latest period.
    func latestEnd(in environment: StoreEnvironment) -> Date {
        plan.duration.periodStart(periodsSinceAnchor, from: anchor, in: environment)
    }

    /// Whether the App Store means to renew it: auto-renew is on, support has not refunded it, and
    /// the sandbox has renewals left.
    func willRenew(in environment: StoreEnvironment) -> Bool {
        autoRenewEnabled && stoppedAt == nil && (environment == .production || renewals < SimulatorStore.sandboxRenewalLimit)
    }

    /// Whether a renewal due now happens: the App Store means to renew, and billing works. (Renewals
    /// due before a refund or a billing failure were made before either was recorded.)
    func renews(in environment: StoreEnvironment) -> Bool {
        willRenew(in: environment) && billingIssue == nil
    }

    /// Moves to the next period, starting at `start`, and says what it is: the pending plan takes
    /// over there, and a `restart` (billing recovered) starts a new run.
    mutating func advance(startingAt start: Date, restart: Bool) -> (plan: Plan, introPrice: Bool) {
        var restart = restart
        if let next = pendingPlan {
            plan = next
            pendingPlan = nil
            introPeriodsLeft = 0
            restart = true
        }
        if restart {
            anchor = start
            periodsSinceAnchor = 0
        }
        periodsSinceAnchor += 1
        renewals += 1
        let introPrice = introPeriodsLeft > 0
        if introPrice { introPeriodsLeft -= 1 }
        return (plan, introPrice)
    }

    /// Switches to `newPlan` at `start` at once (an upgrade, or a crossgrade of equal duration).
    mutating func switchPlan(to newPlan: Plan, at start: Date) {
        plan = newPlan
        pendingPlan = nil
        introPeriodsLeft = 0
        anchor = start
        periodsSinceAnchor = 1
    }
}

/// A family member's copy of a buyer's subscription: the member's own original transaction id and
/// copies of the buyer's periods. What happens next is the buyer's subscription's to say.
struct SharedSubscription: Sendable {
    let originalTransactionId: String
    let buyerOriginalTransactionId: String
    var periodIds: [String] = []
}

/// A change of plan within a subscription group, as a purchase of another product of the group makes it.
public struct SimulatorPlanChange: Encodable, Hashable, Sendable {
    public enum Kind: String, Encodable, Hashable, Sendable {
        /// To a higher level (a smaller number): at once; the current period is cut short.
        case upgrade
        /// To a lower level: at the next renewal.
        case downgrade
        /// To the same level: at once when the durations are equal, else at the next renewal.
        case crossgrade
    }

    public let kind: Kind
    public let fromProductId: String
    public let toProductId: String
    /// When the new product's first period starts.
    public let effectiveDate: Date
    public let isImmediate: Bool
}

/// A subscription's state as the admin API shows it.
public struct SimulatorSubscriptionStatus: Encodable, Hashable, Sendable {
    public let originalTransactionId: String
    public let userId: String
    public let bundleId: String
    public let productId: String
    public let autoRenewProductId: String
    public let autoRenewStatus: Bool
    public let isActive: Bool
    public let expiresDate: Date?
    public let billingFailing: Bool
    public let gracePeriodDays: Int?
    public let isInBillingRetryPeriod: Bool
    public let gracePeriodExpiresDate: Date?
    public let latestTransaction: SimulatorTransaction
    /// Renewals made when billing recovered or the plan changed by this call, if any.
    public var newTransactions: [SimulatorTransaction] = []
}
