import Foundation
import LedgerDomain

/// How far each app's notifications have been checked against Apple's notification history.
public protocol NotificationSyncState: Sendable {
    /// Up to when every notification Apple sent is known to be in the log; nil before a first walk.
    func syncedThrough(app: String, environment: StoreEnvironment) async throws -> Date?

    /// A walk ended: whole (`syncedThrough` moves to the end of its window), or with an error (it
    /// stays where it was).
    func record(_ walk: NotificationSyncWalk) async throws
}

/// One walk of Apple's notification history for an app and environment.
public struct NotificationSyncWalk: Sendable, Hashable {
    public let app: String
    public let environment: StoreEnvironment
    /// The window walked.
    public let from: Date
    public let to: Date
    /// Set when the whole window was walked: the new `syncedThrough`.
    public let syncedThrough: Date?
    public let seen: Int
    public let recovered: Int
    public let error: String?

    public init(app: String, environment: StoreEnvironment, from: Date, to: Date, syncedThrough: Date?, seen: Int, recovered: Int, error: String?) {
        self.app = app
        self.environment = environment
        self.from = from
        self.to = to
        self.syncedThrough = syncedThrough
        self.seen = seen
        self.recovered = recovered
        self.error = error
    }
}
