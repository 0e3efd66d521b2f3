import Foundation
import LedgerDomain

/// One transaction of a verified receipt, with everything the App Store said about it.
///
/// The typed fields are for the client's own checks and logs; `fields` is what the ledger records.
/// Nothing here judges what the transaction is (purchase, renewal, restore): the fold does.
public struct ReceiptTransaction: Hashable, Sendable {
    public let transactionId: String
    /// The first transaction of this purchase or subscription; equal to `transactionId` for a first purchase.
    public let originalTransactionId: String
    public let productId: String
    public let quantity: Int
    public let purchaseDate: Date
    public let originalPurchaseDate: Date
    /// End of the period an auto-renewable transaction paid for; `nil` for every other product type.
    public let expiresDate: Date?
    /// When support refunded or cancelled the transaction; present means revoked.
    public let cancellationDate: Date?
    /// `0` other reason, `1` a problem in the app, as the App Store reports it.
    public let cancellationReason: Int?
    public let isTrialPeriod: Bool
    public let isInIntroOfferPeriod: Bool
    /// The App Store's id of one subscription purchase event, stable across devices and restores.
    public let webOrderLineItemId: String?
    /// Every field the App Store sent for the transaction, by its key, as text: what the ledger records.
    public let fields: [String: String]

    public init(
        transactionId: String,
        originalTransactionId: String,
        productId: String,
        quantity: Int,
        purchaseDate: Date,
        originalPurchaseDate: Date,
        expiresDate: Date?,
        cancellationDate: Date?,
        cancellationReason: Int?,
        isTrialPeriod: Bool,
        isInIntroOfferPeriod: Bool,
        webOrderLineItemId: String?,
        fields: [String: String] = [:]
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.cancellationReason = cancellationReason
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.webOrderLineItemId = webOrderLineItemId
        self.fields = fields
    }

    /// Refunded or cancelled by support: the ledger records a revocation.
    public var isRevoked: Bool { cancellationDate != nil }
}
