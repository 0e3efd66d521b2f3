import LedgerDomain

/// Whose App Store notification is whose: a notification names no user, so it belongs to the user
/// whose stream holds its transaction (or original transaction), or failing that the user whose
/// transactions carry its `appAccountToken`. One that no user holds waits on the app's
/// `notifications/<bundle id>` stream, where a later post of its transaction finds it.
public protocol NotificationInbox: Sendable {
    /// Where the notification keyed `notificationKey` was recorded before, if it was; otherwise the
    /// user who first recorded any of `transactionIDs` in `environment`.
    func lookup(
        _ notificationKey: DeduplicationKey?, transactionIDs: [String], app: String, environment: StoreEnvironment
    ) async throws -> NotificationLookup

    /// The first user of the app whose recorded transactions carry this `appAccountToken`.
    func holder(ofToken token: String, app: String, environment: StoreEnvironment) async throws -> String?

    /// The notifications waiting on the app's notifications stream for any of these original
    /// transactions or tokens, in the order they came.
    func waiting(app: String, environment: StoreEnvironment, originals: [String], tokens: [String]) async throws -> [AppStoreNotificationReceived]
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
