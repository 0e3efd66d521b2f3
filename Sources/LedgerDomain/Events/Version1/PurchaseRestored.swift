import Foundation

/// Version 1 (no longer written): a restore as judged at ingest (`originalTransactionId` is the
/// purchase the ledger pointed it at). Read through the upcaster.
public struct PurchaseRestored: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRestored", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let deviceId: String
    public let purchaseDate: Date
    public let environment: StoreEnvironment
    public let receiptHash: String
}
