import Foundation

/// Version 1 (written before facts were recorded, no longer written): a verified payment
/// transaction as the ledger then judged it at ingest. Read through `TransactionFacts.upcast`.
public struct PurchaseRecorded: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRecorded", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    /// As the catalog said when it was recorded; `unknown` when the catalog did not know it.
    public let productType: ProductType
    public let quantity: Int
    public let purchaseDate: Date
    /// Auto-renewable subscriptions only: when the period this payment bought ends.
    public let expiresDate: Date?
    public let environment: StoreEnvironment
    public let deviceId: String
    /// Decimal text and ISO 4217 code, as the device's product info said; absent when unknown.
    public let price: String?
    public let currency: String?
    /// SHA-256 (hex) of the receipt the App Store verified.
    public let receiptHash: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String, productType: ProductType,
        quantity: Int, purchaseDate: Date, expiresDate: Date? = nil, environment: StoreEnvironment,
        deviceId: String, price: String? = nil, currency: String? = nil, receiptHash: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.environment = environment
        self.deviceId = deviceId
        self.price = price
        self.currency = currency
        self.receiptHash = receiptHash
    }
}
