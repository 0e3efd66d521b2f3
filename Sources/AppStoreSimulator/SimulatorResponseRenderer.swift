import AppStore
import Foundation
import LedgerDomain

/// Writes `verifyReceipt` answers the way the real service does: strings for numbers and booleans,
/// every date three times (`_ms`, GMT text, Pacific text), optional keys left out when empty.
struct SimulatorResponseRenderer: Sendable {
    let environment: StoreEnvironment
    let signer: SimulatorReceiptSigner

    /// The answer to a verify of an authentic receipt of this simulator's environment.
    ///
    /// 21004 when the receipt covers an auto-renewable and `password` is not the app's shared secret.
    /// An old-style receipt of a subscription that has expired or was cancelled answers 21006 with its
    /// content and `latest_expired_receipt_info`; an active one answers 0 with `latest_receipt`.
    func answer(
        payload: SimulatorReceiptPayload,
        view: SimulatorStore.VerificationView,
        password: String?,
        excludeOldTransactions: Bool
    ) -> [String: Any] {
        let coversSubscription = view.covered.contains { $0.productType == .autoRenewable }
        if coversSubscription, password != view.sharedSecret {
            return Self.status(21004)
        }
        switch payload.kind {
        case .transaction:
            return transactionReceiptAnswer(view.covered[0], view: view)
        case .app:
            return appReceiptAnswer(payload: payload, view: view, excludeOldTransactions: excludeOldTransactions)
        }
    }

    static func status(_ code: Int, isRetryable: Bool? = nil) -> [String: Any] {
        var body: [String: Any] = ["status": code]
        if let isRetryable { body["is-retryable"] = isRetryable }
        return body
    }

    // MARK: iOS 6 style transaction receipts

    private func transactionReceiptAnswer(_ transaction: SimulatorTransaction, view: SimulatorStore.VerificationView) -> [String: Any] {
        var body: [String: Any] = ["receipt": oldStyleFields(transaction)]
        guard transaction.productType == .autoRenewable,
              let subscription = view.subscriptions.first(where: { $0.originalTransactionId == transaction.originalTransactionId })
        else {
            body["status"] = 0
            return body
        }
        if subscription.isActive {
            body["status"] = 0
            body["latest_receipt_info"] = oldStyleFields(subscription.latest)
            body["latest_receipt"] = signer.issue(SimulatorReceiptPayload(
                kind: .transaction, environment: environment, bundleId: transaction.bundleId, userId: transaction.userId,
                transactionIds: [subscription.latest.transactionId], issuedAt: view.now.milliseconds
            ))
        } else {
            body["status"] = 21006
            body["latest_expired_receipt_info"] = oldStyleFields(subscription.latest)
        }
        return body
    }

    /// The keys of an old transaction receipt; note `expires_date` in epoch milliseconds, as it was.
    private func oldStyleFields(_ t: SimulatorTransaction) -> [String: Any] {
        var fields: [String: Any] = [
            "quantity": String(t.quantity),
            "product_id": t.productId,
            "transaction_id": t.transactionId,
            "original_transaction_id": t.originalTransactionId,
            "bid": t.bundleId,
            "bvrs": "1.0",
            "item_id": String(Self.stableNumber(t.productId)),
            "unique_identifier": String(format: "%040llx", Self.stableNumber(t.userId)),
        ]
        Self.putDate(t.purchaseDate, "purchase_date", into: &fields)
        Self.putDate(t.originalPurchaseDate, "original_purchase_date", into: &fields)
        if environment == .production {
            fields["app_item_id"] = String(Self.stableNumber(t.bundleId))
            fields["version_external_identifier"] = "1"
        }
        Self.putCommonFields(t, into: &fields)
        if let expires = t.expiresDate {
            fields["expires_date"] = AppStoreDate.millisecondsText(expires)
            fields["expires_date_formatted"] = AppStoreDate.gmtText(expires)
            fields["expires_date_formatted_pst"] = AppStoreDate.pacificText(expires)
        }
        return fields
    }

    // MARK: iOS 7 style app receipts

    private func appReceiptAnswer(
        payload: SimulatorReceiptPayload,
        view: SimulatorStore.VerificationView,
        excludeOldTransactions: Bool
    ) -> [String: Any] {
        var receipt: [String: Any] = [
            "receipt_type": environment == .sandbox ? "ProductionSandbox" : "Production",
            "adam_id": environment == .sandbox ? 0 : Self.stableNumber(payload.bundleId),
            "app_item_id": environment == .sandbox ? 0 : Self.stableNumber(payload.bundleId),
            "bundle_id": payload.bundleId,
            "application_version": "1",
            "download_id": 0,
            "version_external_identifier": 0,
            "original_application_version": "1.0",
            "in_app": view.covered.map(inAppFields),
        ]
        Self.putDate(Date(milliseconds: payload.issuedAt), "receipt_creation_date", into: &receipt)
        Self.putDate(view.now, "request_date", into: &receipt)
        Self.putDate(view.firstPurchase ?? Date(milliseconds: payload.issuedAt), "original_purchase_date", into: &receipt)

        var body: [String: Any] = ["status": 0, "environment": environment.responseValue, "receipt": receipt]
        guard !view.subscriptions.isEmpty else { return body }
        var latest = view.all
        if excludeOldTransactions {
            let newest = Set(view.subscriptions.map(\.latest.transactionId))
            latest.removeAll { $0.productType == .autoRenewable && !newest.contains($0.transactionId) }
        }
        body["latest_receipt_info"] = latest.reversed().map(inAppFields)
        body["latest_receipt"] = signer.issue(SimulatorReceiptPayload(
            kind: .app, environment: environment, bundleId: payload.bundleId, userId: payload.userId,
            transactionIds: view.all.map(\.transactionId), issuedAt: view.now.milliseconds
        ))
        body["pending_renewal_info"] = view.subscriptions.map(pendingRenewalFields)
        return body
    }

    /// An entry of `pending_renewal_info`: what happens at the end of the current period. The retry
    /// and intent keys appear once a subscription is no longer active, as Apple sends them.
    private func pendingRenewalFields(_ subscription: SimulatorStore.SubscriptionView) -> [String: Any] {
        var info: [String: Any] = [
            "auto_renew_product_id": subscription.autoRenewProductId,
            "product_id": subscription.productId,
            "original_transaction_id": subscription.originalTransactionId,
            "auto_renew_status": subscription.willRenew ? "1" : "0",
        ]
        if let intent = subscription.expirationIntent {
            info["expiration_intent"] = String(intent)
            info["is_in_billing_retry_period"] = subscription.isInBillingRetry ? "1" : "0"
        }
        if let grace = subscription.gracePeriodExpiresDate {
            Self.putDate(grace, "grace_period_expires_date", into: &info)
        }
        return info
    }

    /// The keys of an `in_app` / `latest_receipt_info` entry.
    private func inAppFields(_ t: SimulatorTransaction) -> [String: Any] {
        var fields: [String: Any] = [
            "quantity": String(t.quantity),
            "product_id": t.productId,
            "transaction_id": t.transactionId,
            "original_transaction_id": t.originalTransactionId,
        ]
        Self.putDate(t.purchaseDate, "purchase_date", into: &fields)
        Self.putDate(t.originalPurchaseDate, "original_purchase_date", into: &fields)
        if let expires = t.expiresDate {
            Self.putDate(expires, "expires_date", into: &fields)
        }
        Self.putCommonFields(t, into: &fields)
        return fields
    }

    /// The keys both receipt styles give a transaction beyond its ids and dates: ownership, trial
    /// and offer flags, the subscription's web order and group, and how it ended early. Flags are the
    /// strings "true"/"false"; `is_upgraded` appears only when true, `cancellation_reason` only for a
    /// refund (an upgrade cancels without one).
    private static func putCommonFields(_ t: SimulatorTransaction, into fields: inout [String: Any]) {
        fields["in_app_ownership_type"] = t.ownership.rawValue
        fields["is_trial_period"] = t.isTrialPeriod ? "true" : "false"
        if t.productType == .autoRenewable {
            fields["is_in_intro_offer_period"] = t.isInIntroOfferPeriod ? "true" : "false"
        }
        if let webOrder = t.webOrderLineItemId { fields["web_order_line_item_id"] = webOrder }
        if let group = t.subscriptionGroupIdentifier { fields["subscription_group_identifier"] = group }
        if t.isUpgraded { fields["is_upgraded"] = "true" }
        if let cancelled = t.cancellationDate {
            putDate(cancelled, "cancellation_date", into: &fields)
        }
        if let reason = t.cancellationReason { fields["cancellation_reason"] = String(reason) }
    }

    private static func putDate(_ date: Date, _ key: String, into fields: inout [String: Any]) {
        fields[key] = AppStoreDate.gmtText(date)
        fields[key + "_ms"] = AppStoreDate.millisecondsText(date)
        fields[key + "_pst"] = AppStoreDate.pacificText(date)
    }

    /// A number derived from text (FNV-1a), for ids the real service has and the simulator must invent.
    static func stableNumber(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        return hash % 1_000_000_000
    }
}
