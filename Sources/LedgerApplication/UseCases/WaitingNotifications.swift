import Foundation
import LedgerDomain
import Logging

/// What becomes of App Store notifications waiting on an app's notifications stream (no user
/// held their transaction when they came):
///
/// - One whose transaction a user now holds goes to that user (a post usually takes it at once;
///   this catches a post that raced the notification).
/// - One whose `appAccountToken` the app's server bound to a user goes to that user once it has
///   waited `tokenGrace`: time for the device that made the purchase to post it itself, so that a
///   token does not claim a purchase away from the device's own post.
/// - One that waited `expireAfter` with no user is marked expired (`NotificationExpired`, listed
///   for an operator by `ledger notifications list --expired`); a later post of its transaction
///   still takes it, so nothing Apple sent is lost.
///
/// `sweep` does one pass; every server runs it now and then (`WaitingNotificationsService`). Two
/// servers sweeping at once record each thing once: the copies and the expiries are keyed.
public struct WaitingNotifications: Sendable {
    public struct Configuration: Sendable {
        public var tokenGrace: Duration
        public var expireAfter: Duration
        /// Notifications looked at per app and pass.
        public var batch: Int

        public init(tokenGrace: Duration = .seconds(600), expireAfter: Duration = .seconds(30 * 86_400), batch: Int = 500) {
            self.tokenGrace = tokenGrace
            self.expireAfter = expireAfter
            self.batch = batch
        }
    }

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        public var delivered = 0
        public var expired = 0
    }

    let intake: TakeInNotification
    let inbox: any NotificationInbox
    let directory: any AppDirectory
    let store: any EventStore
    public let configuration: Configuration
    let logger: Logger

    public init(intake: TakeInNotification, configuration: Configuration = .init(), logger: Logger) {
        self.intake = intake
        self.inbox = intake.inbox
        self.directory = intake.directory
        self.store = intake.store
        self.configuration = configuration
        self.logger = logger
    }

    /// One pass over every app's waiting notifications, as of `now`.
    public func sweep(now: Date = Date()) async throws -> Pass {
        var pass = Pass()
        for app in try await directory.bundleIDs() {
            let waiting = try await inbox.unclaimed(app: app, state: .waiting, recordedBefore: now - configuration.tokenGrace.inSeconds,
                                                    limit: configuration.batch)
            for item in waiting {
                let notification = item.notification
                let metadata = ["source": "waiting notifications"]
                if let holder = try await inbox.holder(of: TakeInNotification.transactionIDs(of: notification), app: app,
                                                       environment: notification.environment) {
                    if try await deliver(notification, to: holder, app: app, metadata: metadata, why: "its transaction's user") { pass.delivered += 1 }
                } else if let token = notification.appAccountToken, let user = try await inbox.holder(ofToken: token, app: app) {
                    if try await deliver(notification, to: user, app: app, metadata: metadata, why: "the user its appAccountToken is bound to") {
                        pass.delivered += 1
                    }
                } else if item.recordedAt < now - configuration.expireAfter.inSeconds {
                    if try await expire(item, app: app) { pass.expired += 1 }
                }
            }
        }
        return pass
    }

    private func deliver(_ notification: AppStoreNotificationReceived, to user: String, app: String, metadata: [String: String], why: String)
        async throws -> Bool
    {
        let outcome = try await intake.deliver(notification, to: user, app: app, metadata: metadata)
        guard outcome.kind == .recorded else { return false }
        logger.info("a waiting notification went to \(why)", metadata: [
            "ledger.app": "\(app)", "ledger.user": "\(user)", "ledger.notification": "\(notification.notificationUUID)",
            "ledger.type": "\(notification.notificationType)",
        ])
        return true
    }

    private func expire(_ item: UnclaimedNotification, app: String) async throws -> Bool {
        let notification = item.notification
        let key = try DeduplicationKey.appStoreTransaction(app: app, environment: notification.environment, kind: .notificationExpired,
                                                           transactionID: notification.notificationUUID)
        let event = try NewEvent(NotificationExpired(notificationUUID: notification.notificationUUID, waitingSince: item.recordedAt),
                                 metadata: ["source": "waiting notifications"], deduplicationKey: key)
        let result = try await store.append([event], to: try StreamID.notifications(app: app), expecting: .any)
        guard case .appended = result.outcomes.first else { return false }
        logger.warning("a notification waited past its time with no user; it stays listed (ledger notifications list --expired), and a post of its transaction still takes it", metadata: [
            "ledger.app": "\(app)", "ledger.notification": "\(notification.notificationUUID)", "ledger.type": "\(notification.notificationType)",
            "ledger.waiting_since": "\(LedgerJSON.formatTimestamp(item.recordedAt))",
        ])
        return true
    }

    /// The app's notifications no user took, for an operator.
    public func list(app: String, state: UnclaimedNotification.State, limit: Int) async throws -> [UnclaimedNotification] {
        try await inbox.unclaimed(app: app, state: state, recordedBefore: nil, limit: limit)
    }
}
