import Foundation

/// Version 1 (no longer written): an auto-renewable renewal as judged at ingest. Read through the upcaster.
public struct SubscriptionRenewed: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionRenewed", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let purchaseDate: Date
    public let expiresDate: Date
    public let environment: StoreEnvironment
    public let price: String?
    public let currency: String?
    public let receiptHash: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String, purchaseDate: Date,
        expiresDate: Date, environment: StoreEnvironment, price: String? = nil, currency: String? = nil,
        receiptHash: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.environment = environment
        self.price = price
        self.currency = currency
        self.receiptHash = receiptHash
    }
}
