import Foundation
import LedgerDomain

/// The App Store Server API's calls besides the transaction history, as the use cases need them:
/// every signed payload verified before it is returned, every failure a `TransactionHistoryError`
/// (`rateLimited` when Apple said to slow down, `notFound` for an id Apple does not know).
public protocol AppStoreServer: TransactionHistorySource {
    /// One page of the app's notification history between `from` and `to` (Apple pages by 20; the
    /// same window on every page of one walk, `page` the token the previous page gave).
    func notificationHistory(
        app: String, environment: StoreEnvironment, key: ServerAPIKey, from: Date, to: Date, page: String?
    ) async throws -> NotificationHistoryPage

    /// Every auto-renewable subscription of the customer who made `transactionId`, by group, as
    /// Apple has it now (Get All Subscription Statuses).
    func subscriptionStatuses(app: String, environment: StoreEnvironment, key: ServerAPIKey, transactionId: String) async throws -> [SubscriptionStatus]

    /// Send Consumption Information (V2): Apple's answer to a refund request, about `transactionId`.
    func sendConsumption(
        app: String, environment: StoreEnvironment, key: ServerAPIKey, transactionId: String, information: ConsumptionInformation
    ) async throws

    /// The transactions of an order (the id on the customer's e-mail receipt); nil when Apple knows
    /// no such order with a purchase of the app. Production only, as Apple's lookup is.
    func lookUpOrder(app: String, key: ServerAPIKey, orderId: String) async throws -> [HistoryTransaction]?

    /// Asks Apple to send the app a TEST notification; answers the token to ask about it with.
    func requestTestNotification(app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> String

    /// What became of a TEST notification; nil while Apple has not tried to send it yet.
    func testNotificationStatus(app: String, environment: StoreEnvironment, key: ServerAPIKey, token: String) async throws -> TestNotificationStatus?
}

/// A page of Apple's notification history: each notification verified and made into the fact the
/// webhook records, and those that did not verify, with why.
public struct NotificationHistoryPage: Sendable {
    public struct Item: Sendable {
        public let notification: AppStoreNotificationReceived
        public let document: AppStoreDocument

        public init(notification: AppStoreNotificationReceived, document: AppStoreDocument) {
            self.notification = notification
            self.document = document
        }
    }

    public let items: [Item]
    public let refused: [String]
    public let hasMore: Bool
    public let nextPage: String?

    public init(items: [Item], refused: [String], hasMore: Bool, nextPage: String?) {
        self.items = items
        self.refused = refused
        self.hasMore = hasMore
        self.nextPage = nextPage
    }
}

/// One subscription as Apple has it now.
public struct SubscriptionStatus: Sendable, Hashable {
    /// Apple's status: 1 active, 2 expired, 3 billing retry, 4 billing grace period, 5 revoked.
    public let status: Int
    public let group: String
    public let originalTransactionId: String
    /// The latest transaction and the renewal info, as Apple signed them (verified).
    public let transaction: HistoryTransaction?
    public let renewalInfo: [String: String]?

    public init(status: Int, group: String, originalTransactionId: String, transaction: HistoryTransaction?, renewalInfo: [String: String]?) {
        self.status = status
        self.group = group
        self.originalTransactionId = originalTransactionId
        self.transaction = transaction
        self.renewalInfo = renewalInfo
    }

    /// Apple's status in words.
    public var statusName: String {
        switch status {
        case 1: "active"
        case 2: "expired"
        case 3: "billing retry"
        case 4: "billing grace period"
        case 5: "revoked"
        default: "status \(status)"
        }
    }
}

/// Send Consumption Information's body (Apple's `ConsumptionRequest`, V2).
public struct ConsumptionInformation: Sendable, Codable, Hashable {
    /// Always true: without the customer's consent nothing is sent.
    public let customerConsented: Bool
    /// `DELIVERED`, `UNDELIVERED_QUALITY_ISSUE`, `UNDELIVERED_WRONG_ITEM`, `UNDELIVERED_SERVER_OUTAGE`, `UNDELIVERED_OTHER`.
    public let deliveryStatus: String
    public let sampleContentProvided: Bool
    /// Milliunits of a percent of the whole quantity used (0…100000); never for auto-renewables.
    public let consumptionPercentage: Int?
    /// `DECLINE`, `GRANT_FULL` or `GRANT_PRORATED`; nil for no preference.
    public let refundPreference: String?

    public init(deliveryStatus: String, sampleContentProvided: Bool, consumptionPercentage: Int?, refundPreference: String?) {
        self.customerConsented = true
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
    }
}

/// What Apple says became of a TEST notification.
public struct TestNotificationStatus: Sendable, Hashable {
    public let notificationUUID: String
    /// Apple's tries: when, and `SUCCESS`, `NO_RESPONSE`, `UNSUCCESSFUL_HTTP_RESPONSE_CODE`, …
    public let attempts: [Attempt]

    public struct Attempt: Sendable, Hashable {
        public let date: Date
        public let result: String

        public init(date: Date, result: String) {
            self.date = date
            self.result = result
        }
    }

    public init(notificationUUID: String, attempts: [Attempt]) {
        self.notificationUUID = notificationUUID
        self.attempts = attempts
    }
}
