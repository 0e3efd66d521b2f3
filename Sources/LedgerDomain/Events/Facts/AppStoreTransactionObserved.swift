import Foundation

/// One transaction as an App Store answer listed it, with every field it sent. Recorded the first
/// time the ledger sees the transaction, and again whenever the App Store's fields for it change
/// (a `cancellation_date` appears, an expiry moves); the same fields again record nothing.
public struct AppStoreTransactionObserved: LedgerEvent {
    public static let typeName = try! EventTypeName("AppStoreTransactionObserved", version: 1)
    public let transactionId: String
    public let environment: StoreEnvironment
    /// Every field of the transaction, by Apple's key, as text (numbers and booleans as Apple
    /// wrote them). `AppStoreFields` reads them.
    public let fields: [String: String]
    public let receiptHash: String
    /// The device whose post brought it.
    public let deviceId: String
    public let answeredAt: Date
    /// The answer's status: 21006 says the App Store considered the subscription expired then.
    public let status: Int
}
