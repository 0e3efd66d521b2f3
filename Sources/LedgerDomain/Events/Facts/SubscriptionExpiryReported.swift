import Foundation

/// No longer written (a 21006 answer is now an `AppStoreTransactionObserved` with status 21006):
/// the App Store answered status 21006 ("valid but the subscription has expired") for a receipt
/// holding this auto-renewable transaction, at `reportedAt`. What it means is the fold's to judge (an answer before the period's expiry is how Apple
/// reports a subscription support cancelled, so the period then ends at `reportedAt`). No money moved.
public struct SubscriptionExpiryReported: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionExpiryReported", version: 1)
    public let transactionId: String
    public let reportedAt: Date
    /// The App Store's status, 21006.
    public let status: Int
}
