import Foundation
import LedgerDomain

/// Whose App Store notification is whose: a notification names no user, so it belongs to the user
/// whose stream holds its transaction (or original transaction), or failing that the user the
/// app's server bound its `appAccountToken` to. One that no user holds waits on the app's
/// `notifications/<bundle id>` stream, where a later post of its transaction finds it.
public protocol NotificationInbox: Sendable {
    /// Where the notification keyed `notificationKey` was recorded before, if it was; otherwise the
    /// user who first recorded any of `transactionIDs` in `environment`.
    func lookup(
        _ notificationKey: DeduplicationKey?, transactionIDs: [String], app: String, environment: StoreEnvironment
    ) async throws -> NotificationLookup

    /// The user the app's server bound this `appAccountToken` to (`AppAccountTokenBound`), if any.
    /// Never whoever first posted a transaction carrying it: a client chooses its own token.
    func holder(ofToken token: String, app: String) async throws -> String?

    /// The notifications waiting on the app's notifications stream for any of these original
    /// transactions or tokens, in the order they came.
    func waiting(app: String, environment: StoreEnvironment, originals: [String], tokens: [String]) async throws -> [AppStoreNotificationReceived]

    /// Notifications of the app's notifications stream that no user took: still waiting
    /// (recorded before `recordedBefore`, oldest first), or expired (newest first).
    func unclaimed(app: String, state: UnclaimedNotification.State, recordedBefore: Date?, limit: Int) async throws -> [UnclaimedNotification]

    /// CONSUMPTION_REQUEST notifications recorded on users' streams since `recordedAfter` that no
    /// answer was recorded for yet (`ConsumptionInformationSent`), oldest first.
    func unansweredConsumptionRequests(recordedAfter: Date, limit: Int) async throws -> [ConsumptionRequestNotice]
}

/// A refund question of Apple's on a user's stream, waiting for its answer.
public struct ConsumptionRequestNotice: Sendable, Hashable {
    public let app: String
    public let user: String
    public let notification: AppStoreNotificationReceived
    public let position: Int64

    public init(app: String, user: String, notification: AppStoreNotificationReceived, position: Int64) {
        self.app = app
        self.user = user
        self.notification = notification
        self.position = position
    }
}

/// A notification the app's notifications stream holds that no user took.
public struct UnclaimedNotification: Sendable, Hashable {
    public enum State: String, Sendable, Hashable {
        /// Waiting for its user: a post of its transaction, or its token's user.
        case waiting
        /// Waited past its time (`NotificationExpired`): listed for an operator; a post of its
        /// transaction still takes it.
        case expired
    }

    public let notification: AppStoreNotificationReceived
    public let position: Int64
    public let recordedAt: Date
    /// When it expired, for an expired one.
    public let expiredAt: Date?

    public init(notification: AppStoreNotificationReceived, position: Int64, recordedAt: Date, expiredAt: Date? = nil) {
        self.notification = notification
        self.position = position
        self.recordedAt = recordedAt
        self.expiredAt = expiredAt
    }
}

/// What `NotificationInbox.lookup` found.
public struct NotificationLookup: Sendable, Hashable {
    /// Where the notification is recorded already (Apple's retry): the stream and position.
    public var earlier: AppendResult.EventReference?
    /// The user who holds one of its transactions, when it was not recorded before.
    public var holder: String?

    public init(earlier: AppendResult.EventReference? = nil, holder: String? = nil) {
        self.earlier = earlier
        self.holder = holder
    }
}

extension NotificationInbox {
    /// The user who first recorded any of these transactions in `environment`, if one did.
    public func holder(of transactionIDs: [String], app: String, environment: StoreEnvironment) async throws -> String? {
        try await lookup(nil, transactionIDs: transactionIDs, app: app, environment: environment).holder
    }
}
