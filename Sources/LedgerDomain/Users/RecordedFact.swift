/// A fact a command recorded, as an answer names it: where it is in the log, the transaction and
/// product it is about, and its kind. An App Store fact's kind is what the fold makes of it now:
/// purchase, renewal, upgrade, crossgrade or restore for a new observation, refund, expiry_report
/// or update for a changed one; receipt, history (a fetch from the App Store Server API),
/// notification and renewal_info for the other App Store facts; and for the app's own commands
/// device, finish, failure, consumption, revocation and subscription_restore.
public struct RecordedFact: Sendable, Hashable {
    public let transactionId: String?
    public let productId: String?
    public let kind: String
    public let position: Int64

    public init(transactionId: String?, productId: String?, kind: String, position: Int64) {
        self.transactionId = transactionId
        self.productId = productId
        self.kind = kind
        self.position = position
    }

    /// A recorded event as an answer names it; App Store facts by what the fold makes of them in
    /// `state` (the stream after the append that recorded it).
    public init(_ event: PendingEvent, position: Int64, state: UserLedger? = nil) {
        switch event.event {
        case .appStoreTransactionObserved(let e):
            let transaction = state?.transactions[e.transactionId]
            let kind: String
            if let transaction, transaction.position == position {
                kind = transaction.kind.rawValue
            } else if let transaction, transaction.revokedPosition == position {
                kind = "refund"
            } else {
                kind = e.status == 21006 ? "expiry_report" : "update"
            }
            self.init(transactionId: e.transactionId, productId: AppStoreFields(e.fields).productId, kind: kind, position: position)
        case .receiptPosted(let e):
            // No device: a history fetched from the App Store Server API.
            self.init(transactionId: nil, productId: nil, kind: e.deviceId.isEmpty ? "history" : "receipt", position: position)
        case .renewalInfoObserved(let e): self.init(transactionId: e.originalTransactionId, productId: nil, kind: "renewal_info", position: position)
        case .purchaseRecorded(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "purchase", position: position)
        case .subscriptionRenewed(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "renewal", position: position)
        case .purchaseRestored(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "restore", position: position)
        case .purchaseRevoked(let e): self.init(transactionId: e.transactionId, productId: nil, kind: "revocation", position: position)
        case .deviceRegistered: self.init(transactionId: nil, productId: nil, kind: "device", position: position)
        case .appAccountTokenBound: self.init(transactionId: nil, productId: nil, kind: "app_account_token", position: position)
        case .consumptionConsentRecorded: self.init(transactionId: nil, productId: nil, kind: "consumption_consent", position: position)
        case .consumptionInformationSent(let e): self.init(transactionId: e.transactionId, productId: nil, kind: "consumption_answer", position: position)
        case .transactionFinished(let e): self.init(transactionId: e.transactionId, productId: nil, kind: "finish", position: position)
        case .purchaseFailed(let e): self.init(transactionId: nil, productId: e.productId, kind: "failure", position: position)
        case .itemConsumed(let e): self.init(transactionId: nil, productId: e.productId, kind: "consumption", position: position)
        case .subscriptionRestoredToDevice: self.init(transactionId: nil, productId: nil, kind: "subscription_restore", position: position)
        case .subscriptionExpiryReported(let e):
            self.init(transactionId: e.transactionId, productId: nil, kind: "expiry_report", position: position)
        case .appStoreNotificationReceived(let e):
            let fields = e.transaction.map(AppStoreFields.init)
            self.init(transactionId: fields?.transactionId ?? e.originalTransactionId, productId: fields?.productId, kind: "notification", position: position)
        }
    }
}
