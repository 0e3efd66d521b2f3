import AppStore
import Crypto
import Foundation
import LedgerDomain

/// The simulator's App Store: apps, products, test users, families, transactions and its clock, in memory.
///
/// Renewals are not scheduled: they are derived from the clock whenever someone looks (a verify, an
/// admin read), so advancing the clock by an hour and verifying shows every renewal of that hour.
/// A renewal exists once the clock has passed the end of the period before it, for up to 6 renewals
/// in the sandbox, unless support cancelled the subscription first, auto-renew is off or billing
/// fails. Every change of state (a purchase, a refund, billing, auto-renew) first makes the renewals
/// due by then, so that each renewal is decided by the state at its own time.
actor SimulatorStore {
    /// Renewals in the sandbox stop after this many, as Apple's does.
    static let sandboxRenewalLimit = 6

    struct App: Sendable {
        var bundleId: String
        var sharedSecret: String
        var products: [String: SimulatedProduct]
        /// Where App Store Server Notifications V2 for the app go (App Store Connect's setting).
        var notificationURL: String? = nil
        /// App Store Server API keys by key id: the issuer and the public key (x963) that checks tokens.
        var apiKeys: [String: (issuerID: String, publicKey: Data)] = [:]
    }

    /// Something Apple would tell the app's server about (App Store Server Notifications V2),
    /// waiting for `takeNotices`.
    struct Notice: Sendable {
        let type: String
        let subtype: String?
        let transaction: SimulatorTransaction
        /// Auto-renewables: the subscription as it stands when the notice is made.
        let renewal: SubscriptionView?
        let at: Date
        let notificationURL: String
        /// The product, for its price and what else its signed transactions carry.
        let product: SimulatedProduct?
        /// CONSUMPTION_REQUEST: why the customer asked for a refund.
        var consumptionRequestReason: String? = nil
    }

    struct UserApp: Hashable {
        let userId: String
        let bundleId: String
    }

    /// A subscription as a verify answer needs it.
    struct SubscriptionView: Sendable {
        let originalTransactionId: String
        /// The product of the latest period.
        let productId: String
        /// The product the next renewal is of.
        let autoRenewProductId: String
        let latest: SimulatorTransaction
        let willRenew: Bool
        let isActive: Bool
        /// Lapsed because a renewal failed, and the App Store still tries to bill it.
        let isInBillingRetry: Bool
        /// While in billing retry with a grace period: when the grace period ends.
        let gracePeriodExpiresDate: Date?

        /// Why a subscription that is not active ended: 2 a billing error, else 1 (the customer, or
        /// the sandbox, stopped it).
        var expirationIntent: Int? {
            isActive ? nil : (isInBillingRetry ? 2 : 1)
        }
    }

    /// Everything a `verifyReceipt` answer for one receipt is rendered from, read at one instant.
    struct VerificationView: Sendable {
        let now: Date
        let sharedSecret: String
        /// The receipt's own transactions, in their current state (refunds show).
        let covered: [SimulatorTransaction]
        /// Every transaction of the user in the app, renewals included, by purchase date; finished
        /// consumables left out.
        let all: [SimulatorTransaction]
        let subscriptions: [SubscriptionView]
        /// The first purchase in the app (the app receipt's `original_purchase_date`).
        let firstPurchase: Date?
    }

    /// What a purchase did: the new transaction (or, for a change that waits for the next renewal,
    /// the current period's) and the change of plan it made, if any.
    struct Purchase: Sendable {
        let transaction: SimulatorTransaction
        let change: SimulatorPlanChange?
        /// `false` when the purchase only scheduled a change and created no transaction.
        let createdTransaction: Bool
    }

    let environment: StoreEnvironment
    var clockOffset: TimeInterval = 0
    var apps: [String: App] = [:]
    var users: Set<String> = []
    /// Each user's App Store country (ISO 3166-1 alpha-3); "USA" when not given.
    var storefronts: [String: String] = [:]
    var transactions: [String: SimulatorTransaction] = [:]
    var transactionsByUser: [UserApp: [String]] = [:]
    var subscriptions: [String: SimulatorSubscription] = [:]
    var sharedSubscriptions: [String: SharedSubscription] = [:]
    /// Original transaction ids of the user's subscriptions in the app, own and shared.
    var subscriptionsByUser: [UserApp: [String]] = [:]
    var families = SimulatorFamilies()
    var nextTransactionId: Int64
    var nextWebOrderId: Int64
    var nextUserNumber = 1
    var faults = SimulatorFaults()
    /// The team's App Store Connect API keys: issuer and public key by key id.
    var connectKeys: [String: (issuerID: String, publicKey: Data)] = [:]
    var notices: [Notice] = []
    /// Send Consumption Information calls received.
    var consumptionSent: [ConsumptionSent] = []

    init(environment: StoreEnvironment) {
        self.environment = environment
        // Ids start from the wall clock, so a restarted simulator does not reuse the last run's ids
        // (a ledger that saw them would take new purchases for duplicates).
        let base = 1_000_000_000_000_000 + (Int64(Date().timeIntervalSince1970 * 1000) % 100_000_000_000) * 1_000
        self.nextTransactionId = base
        self.nextWebOrderId = base
    }

    // MARK: Clock

    var now: Date { Date().addingTimeInterval(clockOffset) }

    var offsetSeconds: TimeInterval { clockOffset }

    /// Moves the clock forward; it never goes back, so that dates already issued stay in the past.
    func advance(seconds: TimeInterval) throws -> Date {
        guard seconds >= 0, seconds.isFinite else {
            throw SimulatorError.badRequest("the clock only moves forward: give a number of seconds or minutes of 0 or more")
        }
        clockOffset += seconds
        // Renewals happen on the clock, not when someone looks: their notifications go out now.
        for key in subscriptionsByUser.keys { materialize(key) }
        return now
    }
}
