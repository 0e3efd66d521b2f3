import Foundation

/// A payment failed or was cancelled on the device. No money, no ownership; kept for support.
public struct PurchaseFailed: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseFailed", version: 1)
    public let productId: String
    public let deviceId: String
    public let errorCode: String
    public let cancelled: Bool
}
