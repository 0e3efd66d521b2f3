import Foundation

/// A transaction as the App Store confirmed it, in the terms the ledger records.
public struct VerifiedTransaction: Hashable, Sendable {
    public enum Kind: String, Hashable, Sendable {
        /// A payment: the first purchase of something.
        case purchase
        /// An auto-renewable subscription renewed (same original transaction, new transaction id).
        case renewal
        /// A StoreKit restore: a new transaction id pointing at an original purchase.
        case restore
    }

    public let kind: Kind
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let quantity: Int
    public let purchaseDate: Date
    public let expiresDate: Date?
    /// Set when Apple refunded or support cancelled the transaction.
    public let cancellationDate: Date?
    public let environment: StoreEnvironment
    /// Auto-renewables in an answer of status 21006 (the subscription has expired): when the App
    /// Store answered so. Recorded as reported; the fold judges what it means.
    public var expiryReportedAt: Date?

    public init(
        kind: Kind, transactionId: String, originalTransactionId: String, productId: String, quantity: Int,
        purchaseDate: Date, expiresDate: Date? = nil, cancellationDate: Date? = nil, environment: StoreEnvironment,
        expiryReportedAt: Date? = nil
    ) {
        self.expiryReportedAt = expiryReportedAt
        self.kind = kind
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.cancellationDate = cancellationDate
        self.environment = environment
    }
}
