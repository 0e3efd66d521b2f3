import Foundation

/// An event a decision wants appended, with the key that keeps it from being recorded twice.
public struct PendingEvent: Hashable, Sendable {
    public let event: UserEvent
    public let deduplicationKey: DeduplicationKey?

    public init(_ event: UserEvent, deduplicationKey: DeduplicationKey? = nil) {
        self.event = event
        self.deduplicationKey = deduplicationKey
    }
}

/// What recording a receipt decided.
public struct ReceiptDecision: Hashable, Sendable {
    public let events: [PendingEvent]
    /// Transactions of the receipt the stream already holds.
    public let duplicates: [String]
}

/// The decisions taken on one user's stream. Pure: given the stream's state (and the catalog),
/// each returns the events to append or refuses with a `DecisionError`. The caller appends them
/// with the state's version as the expected version and decides again on a conflict.
public enum UserDecisions {
    /// Records what the App Store confirmed: new purchases, renewals, restores and refunds, in
    /// purchase order. `price` and `currency` are what the device showed for the purchase it is
    /// delivering, so they go on the newest new payment of the receipt only; older transactions the
    /// ledger sees for the first time carry no price rather than a wrong one. A transaction the stream holds is a duplicate; a purchase of a
    /// non-consumable the user already owns is recorded as a restore of that ownership (never a
    /// second one, never counted as money twice); a refunded transaction is recorded and revoked.
    public static func recordReceipt(
        _ transactions: [VerifiedTransaction],
        app bundleID: String,
        deviceId: String,
        price: String? = nil,
        currency: String? = nil,
        receiptHash: String,
        catalog: ProductCatalog,
        on state: UserLedger
    ) throws(DecisionError) -> ReceiptDecision {
        var state = state
        var events: [PendingEvent] = []
        var duplicates: [String] = []
        func decide(_ event: PendingEvent) {
            events.append(event)
            state.apply(event.event, version: state.version + 1)
        }
        events += registerDevice(deviceId, on: state)
        if let first = events.first { state.apply(first.event, version: state.version + 1) }

        let ordered = transactions.sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
        let pricedTransaction = ordered.last {
            $0.kind != .restore && state.transactions[$0.transactionId] == nil
        }?.transactionId
        var seen = Set<String>()
        for transaction in ordered where seen.insert(transaction.transactionId).inserted {
            guard transaction.quantity >= 1 || transaction.kind != .purchase else {
                throw .invalidInput("transaction \(transaction.transactionId) has quantity \(transaction.quantity)")
            }
            func key(_ kind: DeduplicationKey.AppStoreKind) throws(DecisionError) -> DeduplicationKey {
                try appStoreKey(app: bundleID, transaction, kind: kind)
            }
            if let recorded = state.transactions[transaction.transactionId] {
                duplicates.append(transaction.transactionId)
                if let cancelled = transaction.cancellationDate, !recorded.isRevoked {
                    decide(PendingEvent(.purchaseRevoked(PurchaseRevoked(
                        transactionId: transaction.transactionId, revokedAt: cancelled, reason: "refunded (App Store cancellation_date)"
                    )), deduplicationKey: try key(.revocation)))
                }
                if let reported = transaction.expiryReportedAt, recorded.expiresDate != nil, recorded.expiryReportedAt == nil {
                    decide(expiryReport(transaction, at: reported, key: try key(.expiryReport)))
                }
                continue
            }
            let type = catalog.type(of: transaction.productId)
            let (price, currency) = transaction.transactionId == pricedTransaction ? (price, currency) : (nil, nil)
            switch transaction.kind {
            case .renewal where transaction.expiresDate != nil:
                decide(PendingEvent(.subscriptionRenewed(SubscriptionRenewed(
                    transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
                    productId: transaction.productId, purchaseDate: transaction.purchaseDate,
                    expiresDate: transaction.expiresDate!, environment: transaction.environment,
                    price: price, currency: currency, receiptHash: receiptHash
                )), deduplicationKey: try key(.renewal)))
            case .restore:
                decide(restore(transaction, pointingAt: transaction.originalTransactionId, deviceId: deviceId,
                               receiptHash: receiptHash, key: try key(.restore)))
            case .purchase, .renewal:
                if type.isOwnedForever, let owner = state.ownership(of: transaction.productId) {
                    // Bought again: the same ownership, recorded, but not a second purchase.
                    decide(restore(transaction, pointingAt: owner.originalTransactionId, deviceId: deviceId,
                                   receiptHash: receiptHash, key: try key(.restore)))
                } else {
                    decide(PendingEvent(.purchaseRecorded(PurchaseRecorded(
                        transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
                        productId: transaction.productId, productType: type, quantity: max(1, transaction.quantity),
                        purchaseDate: transaction.purchaseDate, expiresDate: transaction.expiresDate,
                        environment: transaction.environment, deviceId: deviceId, price: price, currency: currency,
                        receiptHash: receiptHash
                    )), deduplicationKey: try key(.payment)))
                }
            }
            if let cancelled = transaction.cancellationDate {
                decide(PendingEvent(.purchaseRevoked(PurchaseRevoked(
                    transactionId: transaction.transactionId, revokedAt: cancelled, reason: "refunded (App Store cancellation_date)"
                )), deduplicationKey: try key(.revocation)))
            }
            if let reported = transaction.expiryReportedAt, state.transactions[transaction.transactionId]?.expiresDate != nil {
                decide(expiryReport(transaction, at: reported, key: try key(.expiryReport)))
            }
        }
        return ReceiptDecision(events: events, duplicates: duplicates)
    }

    /// The App Store's 21006 answer, as reported. `UserLedger.Transaction.periodEnd` judges it.
    private static func expiryReport(_ transaction: VerifiedTransaction, at instant: Date, key: DeduplicationKey) -> PendingEvent {
        PendingEvent(.subscriptionExpiryReported(SubscriptionExpiryReported(
            transactionId: transaction.transactionId, reportedAt: instant, status: 21006
        )), deduplicationKey: key)
    }

    private static func appStoreKey(app bundleID: String, _ transaction: VerifiedTransaction, kind: DeduplicationKey.AppStoreKind) throws(DecisionError) -> DeduplicationKey {
        do {
            return try .appStoreTransaction(app: bundleID, environment: transaction.environment, kind: kind,
                                            transactionID: transaction.transactionId)
        } catch {
            throw .invalidInput(error.message)
        }
    }

    private static func restore(
        _ transaction: VerifiedTransaction, pointingAt original: String, deviceId: String, receiptHash: String,
        key: DeduplicationKey
    ) -> PendingEvent {
        PendingEvent(.purchaseRestored(PurchaseRestored(
            transactionId: transaction.transactionId, originalTransactionId: original, productId: transaction.productId,
            deviceId: deviceId, purchaseDate: transaction.purchaseDate, environment: transaction.environment,
            receiptHash: receiptHash
        )), deduplicationKey: key)
    }

    /// Uses up `quantity` of a consumable; refused beyond the balance the stream holds.
    public static func consume(
        productId: String, quantity: Int, deviceId: String, catalog: ProductCatalog, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard (1...1_000_000).contains(quantity) else { throw .invalidQuantity(quantity) }
        let type = catalog[productId]?.type
            ?? state.transactionsInOrder.first { $0.productId == productId && $0.kind == .purchase }?.productType
            ?? .unknown
        guard type == .consumable else { throw .notConsumable(productId: productId, type: type) }
        let balance = state.balance(of: productId)
        guard quantity <= balance else {
            throw .insufficientBalance(productId: productId, balance: balance, requested: quantity)
        }
        return registerDevice(deviceId, on: state)
            + [PendingEvent(.itemConsumed(ItemConsumed(productId: productId, quantity: quantity, deviceId: deviceId)))]
    }

    /// Support revokes a transaction: what it gave is taken back.
    public static func revoke(
        transactionId: String, revokedAt: Date, reason: String, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard let transaction = state.transactions[transactionId] else { throw .unknownTransaction(transactionId) }
        guard !transaction.isRevoked else { throw .alreadyRevoked(transactionId) }
        let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= 500 else {
            throw .invalidInput("a revocation needs a reason of 1 to 500 characters, for the audit trail")
        }
        return [PendingEvent(.purchaseRevoked(PurchaseRevoked(transactionId: transactionId, revokedAt: revokedAt, reason: trimmed)))]
    }

    /// Restores every non-renewing period the user paid for to a device, recording which
    /// transactions the device received for the first time.
    public static func restoreNonRenewing(
        toDevice deviceId: String, catalog: ProductCatalog, on state: UserLedger
    ) -> (events: [PendingEvent], periods: [SubscriptionPeriod]) {
        let periods = state.nonRenewingPeriods(catalog: catalog)
        let delivered = state.deliveredToDevice[deviceId, default: []]
        let fresh = periods.map(\.transactionId).filter { !delivered.contains($0) }
        var events = registerDevice(deviceId, on: state)
        if !fresh.isEmpty {
            events.append(PendingEvent(.subscriptionRestoredToDevice(SubscriptionRestoredToDevice(deviceId: deviceId, transactionIds: fresh))))
        }
        return (events, periods)
    }

    /// `DeviceRegistered` the first time a device is seen for the user.
    public static func registerDevice(_ deviceId: String, on state: UserLedger) -> [PendingEvent] {
        state.devices.contains(deviceId) ? [] : [PendingEvent(.deviceRegistered(DeviceRegistered(deviceId: deviceId)))]
    }
}

extension UserDecisions {
    /// The app finished a transaction (StoreKit `finishTransaction`). Finishing it again records nothing.
    public static func finish(transactionId: String, deviceId: String, on state: UserLedger) throws(DecisionError) -> [PendingEvent] {
        guard state.transactions[transactionId] != nil else { throw .unknownTransaction(transactionId) }
        guard !state.isFinished(transactionId) else { return [] }
        return registerDevice(deviceId, on: state)
            + [PendingEvent(.transactionFinished(TransactionFinished(transactionId: transactionId, deviceId: deviceId)))]
    }

    /// A purchase the App Store did not complete (failed or cancelled by the user): no money, but support wants to see it.
    public static func recordFailure(
        productId: String, deviceId: String, errorCode: String, cancelled: Bool, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        let code = errorCode.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !code.isEmpty, code.count <= 100 else {
            throw .invalidInput("errorCode must have 1 to 100 characters (the SKError code or its name)")
        }
        return registerDevice(deviceId, on: state) + [PendingEvent(.purchaseFailed(PurchaseFailed(
            productId: productId, deviceId: deviceId, errorCode: code, cancelled: cancelled
        )))]
    }
}
