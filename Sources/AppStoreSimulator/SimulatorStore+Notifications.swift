import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Notifications

    /// The product a transaction is of, as signing it needs it (its price, Advanced Commerce).
    func product(bundleId: String, productId: String) -> SimulatedProduct? {
        apps[bundleId]?.products[productId]
    }

    /// What happened since the last call that Apple would notify the app's server of, oldest first.
    func takeNotices() -> [Notice] {
        defer { notices.removeAll() }
        return notices
    }

    /// Noted only for an app with a notification URL: Apple sends nothing without one.
    func notify(_ type: String, _ subtype: String? = nil, about transaction: SimulatorTransaction, consumptionRequestReason: String? = nil) {
        guard let app = apps[transaction.bundleId], let url = app.notificationURL else { return }
        let renewal = transaction.productType == .autoRenewable
            ? (subscriptions[transaction.originalTransactionId]).flatMap { view(of: $0, at: now) }
            : nil
        notices.append(Notice(type: type, subtype: subtype, transaction: transaction, renewal: renewal, at: now,
                              notificationURL: url, product: product(bundleId: transaction.bundleId, productId: transaction.productId),
                              consumptionRequestReason: consumptionRequestReason))
    }

    /// The customer asks Apple for a refund of `transactionId`: Apple sends CONSUMPTION_REQUEST
    /// (for any product type) and takes the app's consumption information for 12 hours.
    func requestRefund(transactionId: String, reason: String) throws -> SimulatorTransaction {
        let reasons = ["UNINTENDED_PURCHASE", "FULFILLMENT_ISSUE", "UNSATISFIED_WITH_PURCHASE", "LEGAL", "OTHER"]
        guard reasons.contains(reason) else {
            throw SimulatorError.badRequest("reason is one of \(reasons.joined(separator: ", ")), not \(reason)")
        }
        guard let transaction = transactions[transactionId] else { throw SimulatorError.notFound("no transaction \(transactionId)") }
        guard transaction.cancellationDate == nil else { throw SimulatorError.conflict("\(transactionId) is refunded already") }
        notify("CONSUMPTION_REQUEST", about: transaction, consumptionRequestReason: reason)
        return transaction
    }

    /// The notification Apple sends for a new transaction: none for restores and family members' copies.
    func notifyNew(_ transaction: SimulatorTransaction) {
        guard transaction.isPayment else { return }
        guard transaction.productType == .autoRenewable else {
            notify("ONE_TIME_CHARGE", about: transaction)
            return
        }
        if transaction.transactionId == transaction.originalTransactionId {
            notify("SUBSCRIBED", "INITIAL_BUY", about: transaction)
            return
        }
        let periods = subscriptions[transaction.originalTransactionId]?.periodIds ?? []
        let previous = periods.last { $0 != transaction.transactionId }.flatMap { transactions[$0] }
        if let previous, previous.productId != transaction.productId {
            notify("DID_CHANGE_RENEWAL_PREF", previous.isUpgraded ? "UPGRADE" : "DOWNGRADE", about: transaction)
        } else {
            notify("DID_RENEW", about: transaction)
        }
    }
}
