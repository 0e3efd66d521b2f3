import Foundation
import LedgerDomain

/// One transaction of a verified receipt, with everything the App Store said about it.
///
/// `verified(in:)` reduces it to the ledger's `VerifiedTransaction`, the input of
/// `UserDecisions.recordReceipt`; the extra fields (trial, web order, cancellation reason) stay here
/// for the HTTP answer and for audit.
public struct ReceiptTransaction: Hashable, Sendable {
    /// Purchase, renewal or restore, by the ids and the expiry; see `classify`.
    public let kind: VerifiedTransaction.Kind
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
        webOrderLineItemId: String?
    ) {
        self.kind = Self.classify(transactionId: transactionId, originalTransactionId: originalTransactionId, expiresDate: expiresDate)
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
    }

    /// Refunded or cancelled by support: the ledger records a revocation.
    public var isRevoked: Bool { cancellationDate != nil }

    /// Only auto-renewables carry an expiry, so an expiry plus a new id is a renewal, and a new id without
    /// one is a restore of a non-consumable (or other restorable) purchase.
    public static func classify(transactionId: String, originalTransactionId: String, expiresDate: Date?) -> VerifiedTransaction.Kind {
        guard transactionId != originalTransactionId else { return .purchase }
        return expiresDate == nil ? .restore : .renewal
    }

    /// The transaction in the ledger's terms.
    public func verified(in environment: StoreEnvironment) -> VerifiedTransaction {
        VerifiedTransaction(
            kind: kind, transactionId: transactionId, originalTransactionId: originalTransactionId, productId: productId,
            quantity: quantity, purchaseDate: purchaseDate, expiresDate: expiresDate, cancellationDate: cancellationDate,
            environment: environment
        )
    }
}
