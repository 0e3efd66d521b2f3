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
        public let productType: ProductType
        public let kind: Kind
        public let quantity: Int
        public let purchaseDate: Date
        public let expiresDate: Date?
        public let environment: StoreEnvironment
        public internal(set) var revokedAt: Date?

        public var isRevoked: Bool { revokedAt != nil }
    }

    /// The stream's version: the expected version of the next append.
    public private(set) var version: Int64 = 0
    public private(set) var devices: Set<String> = []
    public private(set) var transactions: [String: Transaction] = [:]
    /// Transaction ids in the order they were recorded.
    public private(set) var order: [String] = []
    public private(set) var consumed: [String: Int] = [:]
    /// Which non-renewing transactions each device has received.
    public private(set) var deliveredToDevice: [String: Set<String>] = [:]
    public private(set) var finished: Set<String> = []

    public init() {}

    public mutating func apply(_ event: UserEvent, version: Int64) {
        self.version = version
        switch event {
        case .deviceRegistered(let event):
            devices.insert(event.deviceId)
        case .purchaseRecorded(let event):
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: event.productType, kind: .purchase,
                quantity: event.quantity, purchaseDate: event.purchaseDate, expiresDate: event.expiresDate,
                environment: event.environment
            ))
            devices.insert(event.deviceId)
        case .subscriptionRenewed(let event):
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: .autoRenewable, kind: .renewal, quantity: 1,
                purchaseDate: event.purchaseDate, expiresDate: event.expiresDate, environment: event.environment
            ))
        case .purchaseRestored(let event):
            let original = transactions[event.originalTransactionId]
            record(Transaction(
                transactionId: event.transactionId, originalTransactionId: event.originalTransactionId,
                productId: event.productId, productType: original?.productType ?? .unknown, kind: .restore,
                quantity: 0, purchaseDate: event.purchaseDate, expiresDate: nil, environment: event.environment
            ))
            devices.insert(event.deviceId)
        case .transactionFinished(let event):
            finished.insert(event.transactionId)
        case .purchaseFailed:
            break
        case .purchaseRevoked(let event):
            transactions[event.transactionId]?.revokedAt = event.revokedAt
        case .itemConsumed(let event):
            consumed[event.productId, default: 0] += event.quantity
        case .subscriptionRestoredToDevice(let event):
            deliveredToDevice[event.deviceId, default: []].formUnion(event.transactionIds)
            devices.insert(event.deviceId)
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

    /// Transactions in the order they were recorded.
    public var transactionsInOrder: [Transaction] {
        order.compactMap { transactions[$0] }
    }
}
