import Foundation

/// One `pending_renewal_info` entry as an answer listed it (auto-renew status and product,
/// expiration intent, billing retry, grace period). Recorded when it first appears and when it changes.
public struct RenewalInfoObserved: LedgerEvent {
    public static let typeName = try! EventTypeName("RenewalInfoObserved", version: 1)
    public let originalTransactionId: String
    public let environment: StoreEnvironment
    public let fields: [String: String]
    public let receiptHash: String
    public let answeredAt: Date
}
