import Foundation

/// What the ledger tells Apple about a refund request (Send Consumption Information), from the
/// user's facts: whether the purchase was delivered, and for a consumable the share of its units
/// used. A pure function of the stream.
public enum ConsumptionFigures {
    /// The answer's figures for the CONSUMPTION_REQUEST `notification`; nil when it names no
    /// transaction this stream holds.
    public static func figures(for notification: TransactionFacts.Notification, state: UserLedger)
        -> (transactionId: String, environment: StoreEnvironment, deliveryStatus: String, consumptionPercentage: Int?)?
    {
        guard let id = notification.transactionId, let transaction = state.transactions[id] else { return nil }
        // Delivered: a device posted it, finished it, or the ledger restored it to one.
        let delivered = transaction.deviceId != nil || state.isFinished(id)
            || state.deliveredToDevice.values.contains { $0.contains(id) }
        let percentage: Int?
        switch transaction.productType {
        case .consumable:
            // Units used are taken from the oldest purchases first; this one's share of its own units.
            var used = state.consumed[transaction.productId, default: 0]
            var mine = 0
            for purchase in state.transactions(ofProduct: transaction.productId) where purchase.kind == .purchase {
                let units = max(0, purchase.quantity - purchase.refundedUnits)
                let taken = min(units, used)
                used -= taken
                if purchase.transactionId == id { mine = taken }
            }
            percentage = delivered && transaction.quantity > 0 ? Int((Double(mine) * 100_000 / Double(transaction.quantity)).rounded()) : 0
        default:
            // Apple works an auto-renewable's share out from the time used, and takes none for it;
            // of a non-consumable or a period the ledger knows no use.
            percentage = nil
        }
        return (id, transaction.environment, delivered ? "DELIVERED" : "UNDELIVERED_OTHER", percentage)
    }
}

extension UserDecisions {
    /// The app reported the user's consent (or its withdrawal); nothing when it is as recorded.
    public static func recordConsumptionConsent(_ consented: Bool, on state: UserLedger) -> [PendingEvent] {
        state.consumptionConsent == consented ? [] : [PendingEvent(.consumptionConsentRecorded(ConsumptionConsentRecorded(consented: consented)))]
    }

    /// What was told Apple about a refund request, recorded once per request.
    public static func recordConsumptionAnswer(
        _ sent: ConsumptionInformationSent, app bundleID: String, environment: StoreEnvironment, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard state.consumptionAnswers[sent.notificationUUID] == nil else { return [] }
        let key: DeduplicationKey
        do {
            key = try .appStoreTransaction(app: bundleID, environment: environment, kind: .consumptionAnswer, transactionID: sent.notificationUUID)
        } catch {
            throw .invalidInput(error.message)
        }
        return [PendingEvent(.consumptionInformationSent(sent), deduplicationKey: key)]
    }
}
