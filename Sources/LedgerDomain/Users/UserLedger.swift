import Foundation

/// What a user's stream says, folded from its events: the state every decision is taken on.
///
/// The stream holds facts: what the App Store reported of each transaction, who posted which
/// receipt at what price, what the app did. `apply` only gathers them; what they mean (purchase,
/// renewal, restore, upgrade, refund, revenue, price) is judged by `TransactionClassifier` with
/// the catalog as it stood at each fact (`classified(by:)`). Applying the stream's events in order
/// always gives the same state.
public struct UserLedger: Hashable, Sendable {
    /// One App Store transaction, as the classifier judges it.
    public struct Transaction: Hashable, Sendable {
        public enum Kind: String, Hashable, Sendable {
            /// The first payment of something.
            case purchase
            /// An auto-renewable period paid for again, for the same product.
            case renewal
            /// A payment for a higher subscription of the group, which ended the current period.
            case upgrade
            /// A renewal into another product of the group (a downgrade or a crossgrade).
            case crossgrade
            /// A new transaction id for something already paid for (a StoreKit restore, a
            /// re-identified period, or a non-consumable bought again). No money.
            case restore

            /// Whether this kind of transaction took money (sandbox and family sharing aside).
            public var isPayment: Bool { self != .restore }
        }

        /// How a transaction was offered.
        public enum Offer: String, Hashable, Sendable, Codable {
            case none
            case freeTrial = "free_trial"
            case introOffer = "intro_offer"
        }

        /// Where a money row's amount comes from.
        public enum PriceSource: String, Hashable, Sendable, Codable {
            /// What Apple signed as paid (a StoreKit 2 transaction or a notification's `price`).
            case appStore = "app_store"
            /// What the device reported for the purchase it posted.
            case device
            /// The catalog's price in force when the fact was recorded.
            case catalog
            /// A free trial: zero.
            case trial
            /// No source knows it: the row is unpriced.
            case none
        }

        public let transactionId: String
        public let originalTransactionId: String
        public let productId: String
        /// As the catalog defined the product when the transaction was recorded (or first defined it).
        public internal(set) var productType: ProductType
        public internal(set) var kind: Kind
        public let quantity: Int
        public let purchaseDate: Date
        public let expiresDate: Date?
        public let environment: StoreEnvironment
        public internal(set) var revokedAt: Date?
        public internal(set) var revocationReason: String?
        /// The device whose post first brought the transaction.
        public let deviceId: String?
        /// Price per unit and currency, and where they come from.
        public internal(set) var price: String?
        public internal(set) var currency: String?
        public internal(set) var priceSource: PriceSource = .none
        /// The money of the whole quantity: Apple's signed `price` as it is (the transaction's
        /// total), or a device's or the catalog's unit price times the quantity.
        public internal(set) var amount: String?
        /// The catalog's price when the device reported a different one (kept and flagged).
        public internal(set) var catalogPrice: String?
        /// Where in the log it was first recorded, and when.
        public let position: Int64
        public let recordedAt: Date?
        /// Where the revocation was recorded, and when the ledger recorded it (`revokedAt` is when
        /// the App Store or support says it happened).
        public internal(set) var revokedPosition: Int64?
        public internal(set) var revocationRecordedAt: Date?
        /// Auto-renewables: when the App Store first answered that the subscription had expired (21006).
        public internal(set) var expiryReportedAt: Date?
        /// Auto-renewables: when an upgrade ended this period (Apple's `is_upgraded` with a cancellation date).
        public internal(set) var upgradedAt: Date?
        public let webOrderLineItemId: String?
        public let offer: Offer
        /// Given by a family member's purchase (`in_app_ownership_type` FAMILY_SHARED): access, no money.
        public let isFamilyShared: Bool
        /// Restores: the transaction whose purchase this restores; nil when the stream never saw it.
        public internal(set) var restores: String?
        /// When the original purchase was made, as the App Store says (`original_purchase_date`).
        public let originalPurchaseDate: Date?
        /// Where the buyer's App Store account is (ISO 3166-1 alpha-3, Apple's `storefront`), and
        /// Apple's id of it; nil when no signed view said (verifyReceipt names no storefront).
        public let storefront: String?
        public let storefrontId: String?
        /// How the revocation took it back, when it is revoked.
        public internal(set) var refund: Refund?

        /// How much a refund took back.
        public struct Refund: Hashable, Sendable {
            public enum Kind: String, Hashable, Sendable {
                /// All of it (Apple's `REFUND_FULL`, a receipt's cancellation, a revocation by support).
                case full
                /// A share of the whole quantity's money and units (`REFUND_PRORATED`).
                case prorated
                /// Taken from a family member's access (`FAMILY_REVOKE`): no money moves.
                case familyRevoke = "family_revoke"
            }

            public let kind: Kind
            /// Prorated: the share in milliunits of a percent (40000 is 40 %); else nil.
            public let share: Int?

            public static let full = Refund(kind: .full, share: nil)

            /// What Apple's signed fields said of a refund (a cancellation no signed view described
            /// is full, as a receipt's is).
            init(_ signed: TransactionFacts.Observed.SignedRevocation?) {
                switch signed?.type {
                case "REFUND_PRORATED" where signed?.percentage.map({ (0...100_000).contains($0) }) == true:
                    self.init(kind: .prorated, share: signed?.percentage)
                case "FAMILY_REVOKE": self.init(kind: .familyRevoke, share: nil)
                default: self = .full
                }
            }

            init(kind: Kind, share: Int?) {
                self.kind = kind
                self.share = share
            }
        }

        /// Units a refund took back: all of them, none for a family revocation, and for a
        /// prorated refund of a consumable its share of the quantity (to the nearest unit); any
        /// other product's refund takes the product back whole.
        public var refundedUnits: Int {
            guard let refund else { return 0 }
            switch refund.kind {
            case .full: return quantity
            case .familyRevoke: return 0
            case .prorated: return productType == .consumable ? Money.units(of: quantity, milliPercent: refund.share ?? 100_000) : quantity
            }
        }

        /// Money a refund gave back: the whole amount, its share for a prorated refund, nothing
        /// for a family revocation; nil when the transaction is unpriced.
        public var refundedAmount: String? {
            guard let refund, let amount else { return nil }
            switch refund.kind {
            case .full: return amount
            case .familyRevoke: return "0"
            case .prorated: return Money.share(of: amount, milliPercent: refund.share ?? 100_000, currency: currency)
            }
        }

        /// Where the period this transaction paid for ends: its expiry, or earlier when the App
        /// Store said the subscription was over (21006) or an upgrade ended it while it still ran.
        public var periodEnd: Date? {
            guard let expiresDate else { return nil }
            return [expiryReportedAt, upgradedAt].compactMap { $0 }.filter { $0.milliseconds < expiresDate.milliseconds }.min() ?? expiresDate
        }

        public var isRevoked: Bool { revokedAt != nil }

        /// The same transaction before pricing.
        var unpriced: Transaction {
            var copy = self
            copy.price = nil
            copy.currency = nil
            copy.priceSource = .none
            copy.catalogPrice = nil
            copy.amount = nil
            return copy
        }

        /// Money taken, as finance counts it: a payment, in production, not family-shared.
        public var isRevenue: Bool { kind.isPayment && environment == .production && !isFamilyShared }

        /// Whether it gives ownership of an owned-for-ever product: a purchase, or a restore of a
        /// purchase the stream never saw (bought before the ledger, or a lost post).
        public var grantsOwnership: Bool { kind == .purchase || (kind == .restore && restores == nil) }
    }

    /// A delivery to a device: a purchase, a restore, or non-renewing periods the ledger restored.
    public struct Delivery: Hashable, Sendable {
        public enum Kind: String, Hashable, Sendable {
            case purchase, restore, subscriptionRestore = "subscription_restore"
        }

        public let deviceId: String
        public let transactionId: String
        public let kind: Kind
        public let position: Int64
        public let recordedAt: Date?
    }

    /// Where an event sits in the log; folds that only decide leave it out.
    public struct Context: Hashable, Sendable {
        public let position: Int64
        public let recordedAt: Date?

        public init(position: Int64, recordedAt: Date?) {
            self.position = position
            self.recordedAt = recordedAt
        }
    }

    /// The stream's version: the expected version of the next append.
    public private(set) var version: Int64 = 0
    /// The log position of the last event folded (0 when none was folded with its position).
    public private(set) var lastPosition: Int64 = 0
    public private(set) var devices: Set<String> = []
    /// The `appAccountToken`s the app's server bound to this user (lower case).
    public private(set) var boundTokens: Set<String> = []
    /// Whether the user consented to Apple being told how they used their purchases, as the app
    /// last reported; nil when it never did.
    public private(set) var consumptionConsent: Bool?
    /// What was told Apple about each refund request, by its notification's UUID.
    public private(set) var consumptionAnswers: [String: ConsumptionAnswer] = [:]

    /// What was told Apple about a refund request, and where in the log.
    public struct ConsumptionAnswer: Hashable, Sendable {
        public let sent: ConsumptionInformationSent
        public let position: Int64
        public let recordedAt: Date?
    }
    /// The facts the classifier reads.
    public private(set) var facts = TransactionFacts()
    public private(set) var consumed: [String: Int] = [:]
    /// Which non-renewing transactions each device has received.
    public private(set) var deliveredToDevice: [String: Set<String>] = [:]
    /// Each finished transaction, with where its first `TransactionFinished` is in the log.
    public private(set) var finishPositions: [String: Int64] = [:]
    /// The catalog the transactions are classified with.
    public private(set) var catalog = ProductCatalog()
    /// The rules they are classified by: `.current` but in replays that show a fix.
    public private(set) var rules = TransactionClassifier.Rules.current

    /// The transactions as classified, by id, and their order (the order they were recorded).
    public private(set) var transactions: [String: Transaction] = [:]
    public private(set) var order: [String] = []
    private var restoredToDevices: [Delivery] = []
    /// The last judgement, so the next one looks again only at what changed since.
    private var judgement = KeptJudgement()

    /// Whether a device finished the transaction.
    public func isFinished(_ transactionId: String) -> Bool { finishPositions[transactionId] != nil }

    public init() {}

    /// Folds one event and judges the transactions again: the state is ready for decisions.
    public mutating func apply(_ event: UserEvent, version: Int64, context: Context? = nil) {
        gather(event, version: version, context: context)
        classify()
    }

    /// Folds one event without judging: `transactions` and `deliveries` stay as they were until
    /// `classified(by:)`. For folds of whole streams, which judge once at the end.
    public mutating func gather(_ event: UserEvent, version: Int64, context: Context? = nil) {
        self.version = version
        let position = context?.position ?? 0
        lastPosition = max(lastPosition, position)
        let recordedAt = context?.recordedAt
        let at = TransactionFacts.Recorded(position: position, recordedAt: recordedAt)
        switch event {
        case .receiptPosted, .appStoreTransactionObserved, .renewalInfoObserved: break
        default: facts.closePost()
        }
        switch event {
        case .deviceRegistered(let event):
            devices.insert(event.deviceId)
            return
        case .appAccountTokenBound(let event):
            boundTokens.insert(event.token)
            return
        case .consumptionConsentRecorded(let event):
            consumptionConsent = event.consented
            return
        case .consumptionInformationSent(let event):
            consumptionAnswers[event.notificationUUID] = ConsumptionAnswer(sent: event, position: position, recordedAt: recordedAt)
            return
        case .receiptPosted(let event):
            // A history fetched from the App Store names no device.
            if !event.deviceId.isEmpty { devices.insert(event.deviceId) }
            facts.post(event, at: at)
        case .appStoreTransactionObserved(let event):
            // Apple alone (a notification) names no device.
            if !event.deviceId.isEmpty { devices.insert(event.deviceId) }
            facts.observe(event, at: at)
        case .appStoreNotificationReceived(let event):
            facts.notify(event, at: at)
        case .renewalInfoObserved(let event):
            facts.observe(event, at: at)
            return
        case .purchaseRecorded(let event):
            devices.insert(event.deviceId)
            facts.upcast(event, at: at)
        case .subscriptionRenewed(let event):
            facts.upcast(event, at: at)
        case .purchaseRestored(let event):
            devices.insert(event.deviceId)
            facts.upcast(event, at: at)
        case .purchaseRevoked(let event):
            facts.revoke(event, at: at)
        case .subscriptionExpiryReported(let event):
            facts.reportExpiry(event)
        case .transactionFinished(let event):
            if finishPositions[event.transactionId] == nil { finishPositions[event.transactionId] = position }
            return
        case .purchaseFailed:
            return
        case .itemConsumed(let event):
            consumed[event.productId, default: 0] += event.quantity
            return
        case .subscriptionRestoredToDevice(let event):
            deliveredToDevice[event.deviceId, default: []].formUnion(event.transactionIds)
            devices.insert(event.deviceId)
            for transactionId in event.transactionIds {
                restoredToDevices.append(Delivery(deviceId: event.deviceId, transactionId: transactionId, kind: .subscriptionRestore,
                                                  position: position, recordedAt: recordedAt))
            }
        }
    }

    /// The same state with its transactions judged with `catalog` (the app's catalog, with its
    /// history: each fact sees the catalog as it stood when the fact was recorded).
    public func classified(by catalog: ProductCatalog, rules: TransactionClassifier.Rules = .current) -> UserLedger {
        var copy = self
        copy.classify(by: catalog, rules: rules)
        return copy
    }

    /// Judges the transactions with `catalog`, in place. Only the transactions whose facts changed
    /// since the last judgement, and those the rules tie to them, are judged again, unless the
    /// catalog, the rules or the user's currency differ from last time (`KeptJudgement`): the
    /// result is always what judging every transaction from scratch gives.
    public mutating func classify(by catalog: ProductCatalog, rules: TransactionClassifier.Rules = .current) {
        self.catalog = catalog
        self.rules = rules
        classify()
    }

    private mutating func classify() {
        judgement.judge(facts, catalog: catalog, rules: rules, into: &transactions)
        order = facts.order  // every transaction observed is judged
    }

    /// Every delivery to a device, in log order: each transaction to the device whose post first
    /// brought it, and the non-renewing periods the ledger restored to other devices.
    public var deliveries: [Delivery] {
        var deliveries: [Delivery] = transactionsInOrder.compactMap { transaction in
            guard let device = transaction.deviceId else { return nil }
            return Delivery(deviceId: device, transactionId: transaction.transactionId,
                            kind: transaction.kind == .restore ? .restore : .purchase,
                            position: transaction.position, recordedAt: transaction.recordedAt)
        }
        deliveries += restoredToDevices
        return deliveries.enumerated().sorted { ($0.element.position, $0.offset) < ($1.element.position, $1.offset) }.map(\.element)
    }

    /// Purchased (purchases' quantities, less what refunds took back of them) minus consumed.
    /// Below zero only after a refund of something already used.
    public func balance(of productId: String) -> Int {
        purchasedUnits(of: productId) - consumed[productId, default: 0]
    }

    /// Units of the product bought and not refunded.
    public func purchasedUnits(of productId: String) -> Int {
        transactions(ofProduct: productId).reduce(0) { sum, transaction in
            transaction.kind == .purchase ? sum + transaction.quantity - transaction.refundedUnits : sum
        }
    }

    /// The product's transactions as classified, in the order they were recorded.
    public func transactions(ofProduct productId: String) -> [Transaction] {
        transactions(at: facts.orderOfProduct[productId] ?? [])
    }

    /// The transactions at these places of the recorded order (ascending), as classified.
    func transactions(at offsets: [Int]) -> [Transaction] {
        offsets.compactMap { transactions[facts.order[$0]] }
    }

    /// The live transaction that owns a non-consumable or free subscription, if any.
    public func ownership(of productId: String) -> Transaction? {
        transactions(ofProduct: productId).first {
            $0.productId == productId && $0.grantsOwnership && !$0.isRevoked && $0.productType.isOwnedForever
        }
    }

    /// Transactions in the order they were recorded.
    public var transactionsInOrder: [Transaction] {
        order.compactMap { transactions[$0] }
    }
}
