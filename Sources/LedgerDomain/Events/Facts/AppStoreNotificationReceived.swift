import Foundation

/// An App Store Server Notification (version 2), as Apple signed it and the ledger verified it:
/// what happened (`notificationType`, `subtype`) and the transaction and renewal info it carried,
/// every field verbatim in Apple's naming. Recorded once per `notificationUUID`: on the stream of
/// the user who holds its original transaction, followed by what it says of the transaction and
/// the renewal info (as `AppStoreTransactionObserved` and `RenewalInfoObserved`, when news); or,
/// while no user holds it, on the app's `notifications/<bundle id>` stream, and copied to the
/// user's stream when the user appears.
public struct AppStoreNotificationReceived: LedgerEvent {
    public static let typeName = try! EventTypeName("AppStoreNotificationReceived", version: 1)
    public let notificationUUID: String
    /// SUBSCRIBED, DID_RENEW, REFUND, TEST, … as Apple named it; types the ledger does not know are kept all the same.
    public let notificationType: String
    public let subtype: String?
    public let environment: StoreEnvironment
    /// When Apple signed the notification.
    public let signedDate: Date
    /// The payload's other fields as text (`version`, and `data`'s and `summary`'s under `data.`
    /// and `summary.`: `data.appAppleId`, `data.bundleVersion`, `data.status`, …).
    public let fields: [String: String]
    /// `data.signedTransactionInfo`, verified and decoded.
    public let transaction: [String: String]?
    /// `data.signedRenewalInfo`, verified and decoded.
    public let renewalInfo: [String: String]?
    /// SHA-256 (hex) of the signed payload as Apple posted it; the payload is kept in `ledger.receipts`.
    public let payloadHash: String

    public init(
        notificationUUID: String, notificationType: String, subtype: String?, environment: StoreEnvironment, signedDate: Date,
        fields: [String: String], transaction: [String: String]?, renewalInfo: [String: String]?, payloadHash: String
    ) {
        self.notificationUUID = notificationUUID
        self.notificationType = notificationType
        self.subtype = subtype
        self.environment = environment
        self.signedDate = signedDate
        self.fields = fields
        self.transaction = transaction
        self.renewalInfo = renewalInfo
        self.payloadHash = payloadHash
    }

    /// The original transaction the notification is about, which says whose it is.
    public var originalTransactionId: String? {
        transaction.flatMap { AppStoreFields($0).originalTransactionId } ?? renewalInfo.flatMap { AppStoreFields($0).originalTransactionId }
    }

    /// The app's own id for the user, when the app set one at purchase.
    public var appAccountToken: String? {
        transaction?["appAccountToken"].flatMap { $0.isEmpty ? nil : $0 }
    }
}
