/// What the App Store plans for one auto-renewable subscription (an entry of `pending_renewal_info`).
public struct PendingRenewalInfo: Hashable, Sendable {
    public let originalTransactionId: String
    public let productId: String?
    /// The product the subscription renews into (differs from `productId` after a change of plan).
    public let autoRenewProductId: String?
    /// Whether the subscription will renew at the end of its period.
    public let willAutoRenew: Bool?
    /// Why it expired: 1 cancelled by the customer, 2 billing error, 3 refused a price increase, 4 product unavailable, 5 unknown.
    public let expirationIntent: Int?
    public let isInBillingRetryPeriod: Bool?
    /// Every field of the entry as the App Store sent it, as text: what the ledger records.
    public let fields: [String: String]

    public init(
        originalTransactionId: String,
        productId: String?,
        autoRenewProductId: String?,
        willAutoRenew: Bool?,
        expirationIntent: Int?,
        isInBillingRetryPeriod: Bool?,
        fields: [String: String] = [:]
    ) {
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.autoRenewProductId = autoRenewProductId
        self.willAutoRenew = willAutoRenew
        self.expirationIntent = expirationIntent
        self.isInBillingRetryPeriod = isInBillingRetryPeriod
        self.fields = fields
    }
}
