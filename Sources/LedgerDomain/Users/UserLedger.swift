import Foundation

/// What a user's stream says, folded from its events: the state every decision is taken on.
///
/// Folding is pure and order-sensitive only where the log is (versions): applying the stream's
/// events in order always gives the same state.
public struct UserLedger: Hashable, Sendable {
    /// One App Store transaction recorded on the stream.
    public struct Transaction: Hashable, Sendable {
        public enum Kind: String, Hashable, Sendable {
            case purchase, renewal, restore
        }

        public let transactionId: String
        public let originalTransactionId: String
        public let productId: String
        /// As recorded; restores and renewals take the type of what they point at.
        public internal(set) var productType: ProductType
        public let kind: Kind
        public let quantity: Int
        public let purchaseDate: Date
        public let expiresDate: Date?
        public let environment: StoreEnvironment
        public internal(set) var revokedAt: Date?
        public internal(set) var revocationReason: String?
        /// The device the transaction was first delivered to.
        public let deviceId: String?
        /// Price and currency as recorded (purchases and renewals).
        public let price: String?
        public let currency: String?
        /// Where in the log it was recorded, and when.
        public let position: Int64
        public let recordedAt: Date?
        /// Where the revocation was recorded, and when the ledger recorded it (`revokedAt` is when
        /// the App Store or support says it happened).
        public internal(set) var revokedPosition: Int64?
        public internal(set) var revocationRecordedAt: Date?
        /// Auto-renewables: when the App Store first answered that the subscription had expired (21006).
        public internal(set) var expiryReportedAt: Date? = nil

        /// Where the period this transaction paid for ends: its expiry, or, when the App Store said
        /// the subscription was over while the period still ran (support cancelled it), then.
        public var periodEnd: Date? {
            guard let expiresDate else { return nil }
            guard let reported = expiryReportedAt, reported.milliseconds < expiresDate.milliseconds else { return expiresDate }
            return reported
        }

        public var isRevoked: Bool { revokedAt != nil }
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
    public private(set) var transactions: [String: Transaction] = [:]
    /// Transaction ids in the order they were recorded.
    public private(set) var order: [String] = []
    public private(set) var consumed: [String: Int] = [:]
    /// Which non-renewing transactions each device has received.
    public private(set) var deliveredToDevice: [String: Set<String>] = [:]
    /// Each finished transaction, with where its first `TransactionFinished` is in the log.
    public private(set) var finishPositions: [String: Int64] = [:]

    /// Whether a device finished the transaction.
    public func isFinished(_ transactionId: String) -> Bool { finishPositions[transactionId] != nil }
    /// Every delivery to a device, in log order.
    public private(set) var deliveries: [Delivery] = []

    public init() {}

    public mutating func apply(_ event: UserEvent, version: Int64, context: Context? = nil) {
        self.version = version
        let position = context?.position ?? 0
        lastPosition = max(lastPosition, position)
        let recordedAt = context?.recordedAt
        switch event {
        case .deviceRegistered(let event):
            devices.insert(event.deviceId)
        case .purchaseRecorded(let event):
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: event.productType, kind: .purchase,
                quantity: event.quantity, purchaseDate: event.purchaseDate, expiresDate: event.expiresDate,
                environment: event.environment, deviceId: event.deviceId, price: event.price, currency: event.currency,
                position: position, recordedAt: recordedAt
            ))
            devices.insert(event.deviceId)
            deliveries.append(Delivery(deviceId: event.deviceId, transactionId: event.transactionId, kind: .purchase,
                                       position: position, recordedAt: recordedAt))
        case .subscriptionRenewed(let event):
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: .autoRenewable, kind: .renewal, quantity: 1,
                purchaseDate: event.purchaseDate, expiresDate: event.expiresDate, environment: event.environment,
                deviceId: nil, price: event.price, currency: event.currency, position: position, recordedAt: recordedAt
            ))
        case .purchaseRestored(let event):
            let original = transactions[event.originalTransactionId]
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: original?.productType ?? .unknown, kind: .restore,
                quantity: 0, purchaseDate: event.purchaseDate, expiresDate: nil, environment: event.environment,
                deviceId: event.deviceId, price: nil, currency: nil, position: position, recordedAt: recordedAt
            ))
            devices.insert(event.deviceId)
            deliveries.append(Delivery(deviceId: event.deviceId, transactionId: event.transactionId, kind: .restore,
                                       position: position, recordedAt: recordedAt))
        case .transactionFinished(let event):
            if finishPositions[event.transactionId] == nil { finishPositions[event.transactionId] = position }
        case .purchaseFailed:
            break
        case .purchaseRevoked(let event):
            transactions[event.transactionId]?.revokedAt = event.revokedAt
            transactions[event.transactionId]?.revocationReason = event.reason
            transactions[event.transactionId]?.revokedPosition = position
            transactions[event.transactionId]?.revocationRecordedAt = recordedAt
        case .subscriptionExpiryReported(let event):
            if let earlier = transactions[event.transactionId]?.expiryReportedAt, earlier <= event.reportedAt { break }
            transactions[event.transactionId]?.expiryReportedAt = event.reportedAt
        case .itemConsumed(let event):
            consumed[event.productId, default: 0] += event.quantity
        case .subscriptionRestoredToDevice(let event):
            deliveredToDevice[event.deviceId, default: []].formUnion(event.transactionIds)
            devices.insert(event.deviceId)
            for transactionId in event.transactionIds {
                deliveries.append(Delivery(deviceId: event.deviceId, transactionId: transactionId, kind: .subscriptionRestore,
                                           position: position, recordedAt: recordedAt))
            }
        }
    }

    private mutating func record(_ transaction: Transaction) {
        guard transactions[transaction.transactionId] == nil else { return }
        transactions[transaction.transactionId] = transaction
        order.append(transaction.transactionId)
    }

    /// Purchased (non-revoked purchases' quantities) minus consumed. Below zero only after a
    /// revocation of something already used.
    public func balance(of productId: String) -> Int {
        let purchased = transactions.values
            .filter { $0.productId == productId && $0.kind == .purchase && !$0.isRevoked }
            .reduce(0) { $0 + $1.quantity }
        return purchased - consumed[productId, default: 0]
    }

    /// The live purchase that owns a non-consumable or free subscription, if any.
    public func ownership(of productId: String) -> Transaction? {
        order.lazy.compactMap { transactions[$0] }.first {
            $0.productId == productId && $0.kind == .purchase && !$0.isRevoked && $0.productType.isOwnedForever
        }
    }

    /// The same state with purchases of products the catalog did not know when they were
    /// recorded (`unknown`) classified by the catalog as it is now.
    public func classified(by catalog: ProductCatalog) -> UserLedger {
        var copy = self
        for (id, transaction) in transactions where transaction.productType == .unknown {
            let type = catalog.type(of: transaction.productId)
            guard type != .unknown else { continue }
            copy.transactions[id]?.productType = type
        }
        return copy
    }

    /// Transactions in the order they were recorded.
    public var transactionsInOrder: [Transaction] {
        order.compactMap { transactions[$0] }
    }
}
