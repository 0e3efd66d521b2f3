import Foundation

// What the App Store said, recorded as it said it. Nothing here is a judgement: whether a
// transaction is a purchase, a renewal, a restore, an upgrade or a refund is decided by the fold
// (`TransactionClassifier`), so a fixed rule and a replay change every past answer.

/// A device posted a receipt and the App Store verified it: who posted it, what the device said
/// it showed for the purchase it was delivering, and which transactions the answer listed.
/// Recorded with the observations that post brought (and only when it brought some).
public struct ReceiptPosted: LedgerEvent {
    public static let typeName = try! EventTypeName("ReceiptPosted", version: 1)
    /// SHA-256 (hex) of the receipt as posted; the receipt itself is in `ledger.receipts`.
    public let receiptHash: String
    /// SHA-256 (hex) of the App Store's answer; the answer is in `ledger.receipt_answers`.
    public let answerHash: String
    public let deviceId: String
    public let environment: StoreEnvironment
    /// The App Store's status: 0, or 21006 (valid, but the subscription has expired).
    public let status: Int
    /// When the App Store answered (its `request_date`).
    public let answeredAt: Date
    /// What the device's product info showed for the purchase it was delivering, if it said.
    public let price: String?
    public let currency: String?
    /// Every transaction id the answer listed, in its order.
    public let transactionIds: [String]

    public init(
        receiptHash: String, answerHash: String, deviceId: String, environment: StoreEnvironment, status: Int,
        answeredAt: Date, price: String?, currency: String?, transactionIds: [String]
    ) {
        self.receiptHash = receiptHash
        self.answerHash = answerHash
        self.deviceId = deviceId
        self.environment = environment
        self.status = status
        self.answeredAt = answeredAt
        self.price = price
        self.currency = currency
        self.transactionIds = transactionIds
    }
}

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

    public init(
        transactionId: String, environment: StoreEnvironment, fields: [String: String], receiptHash: String,
        deviceId: String, answeredAt: Date, status: Int
    ) {
        self.transactionId = transactionId
        self.environment = environment
        self.fields = fields
        self.receiptHash = receiptHash
        self.deviceId = deviceId
        self.answeredAt = answeredAt
        self.status = status
    }
}

/// One `pending_renewal_info` entry as an answer listed it (auto-renew status and product,
/// expiration intent, billing retry, grace period). Recorded when it first appears and when it changes.
public struct RenewalInfoObserved: LedgerEvent {
    public static let typeName = try! EventTypeName("RenewalInfoObserved", version: 1)
    public let originalTransactionId: String
    public let environment: StoreEnvironment
    public let fields: [String: String]
    public let receiptHash: String
    public let answeredAt: Date

    public init(originalTransactionId: String, environment: StoreEnvironment, fields: [String: String], receiptHash: String, answeredAt: Date) {
        self.originalTransactionId = originalTransactionId
        self.environment = environment
        self.fields = fields
        self.receiptHash = receiptHash
        self.answeredAt = answeredAt
    }
}

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
