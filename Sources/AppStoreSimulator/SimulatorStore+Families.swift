import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Internals: family sharing

    /// Gives the member a copy of each of the organizer's purchases of a family-shareable product in
    /// the app: their own transaction ids, the organizer's dates, `FAMILY_SHARED`. Copies made earlier
    /// follow the organizer's transaction (a refund or an upgrade shows on both); a purchase refunded
    /// before it was shared is not shared.
    func shareFamilyPurchases(with member: UserApp, from buyer: UserApp) {
        guard let app = apps[member.bundleId] else { return }
        materialize(buyer)
        for sourceId in transactionsByUser[buyer] ?? [] {
            guard let source = transactions[sourceId], source.isPayment,
                  app.products[source.productId]?.familyShareable == true
            else { continue }
            if let copyId = families.copy(of: sourceId, for: member.userId), var copy = transactions[copyId] {
                copy.cancellationDate = source.cancellationDate
                copy.cancellationReason = source.cancellationReason
                copy.isUpgraded = source.isUpgraded
                transactions[copyId] = copy
                continue
            }
            guard !source.isRefunded else { continue }
            let copy = record(familyCopy(of: source, for: member))
            families.recordCopy(copy.transactionId, of: sourceId, for: member.userId)
        }
    }

    func familyCopy(of source: SimulatorTransaction, for member: UserApp) -> SimulatorTransaction {
        let id = takeTransactionId()
        var original = id
        if source.productType == .autoRenewable {
            if let existing = families.sharedSubscription(of: source.originalTransactionId, for: member.userId) {
                original = existing
                sharedSubscriptions[existing]?.periodIds.append(id)
            } else {
                families.recordSharedSubscription(id, of: source.originalTransactionId, for: member.userId)
                sharedSubscriptions[id] = SharedSubscription(
                    originalTransactionId: id, buyerOriginalTransactionId: source.originalTransactionId, periodIds: [id]
                )
                subscriptionsByUser[member, default: []].append(id)
            }
        }
        return SimulatorTransaction(
            transactionId: id, originalTransactionId: original, userId: member.userId, bundleId: member.bundleId,
            productId: source.productId, productType: source.productType, quantity: source.quantity,
            purchaseDate: source.purchaseDate, originalPurchaseDate: source.originalPurchaseDate, expiresDate: source.expiresDate,
            webOrderLineItemId: source.productType == .autoRenewable ? takeWebOrderId() : nil,
            cancellationDate: source.cancellationDate, cancellationReason: source.cancellationReason,
            ownership: .familyShared, subscriptionGroupIdentifier: source.subscriptionGroupIdentifier,
            isTrialPeriod: source.isTrialPeriod, isInIntroOfferPeriod: source.isInIntroOfferPeriod, isUpgraded: source.isUpgraded,
            sharedTransactionId: source.transactionId
        )
    }
}
