import Foundation

/// A revocation by support (and, in logs written before facts were recorded, a refund the
/// App Store reported): what the transaction gave is taken back.
public struct PurchaseRevoked: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRevoked", version: 1)
    public let transactionId: String
    public let revokedAt: Date
    public let reason: String
}
