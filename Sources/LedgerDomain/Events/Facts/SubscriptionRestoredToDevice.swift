import Foundation

/// The ledger restored the user's non-renewing subscription periods to a device (the App Store
/// does not restore them itself).
public struct SubscriptionRestoredToDevice: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionRestoredToDevice", version: 1)
    public let deviceId: String
    public let transactionIds: [String]
}
