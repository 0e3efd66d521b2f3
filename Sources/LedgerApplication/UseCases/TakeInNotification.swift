import LedgerDomain
import Logging

/// Takes in an App Store Server Notification (V2) whose signature was verified: records it once
/// per `notificationUUID`, on the stream of the user it belongs to, followed by what it says of
/// the transaction and the renewal info that is news there.
///
/// A notification names no user. It belongs to the user who holds its transaction or original
/// transaction; with none yet it waits on the app's `notifications/<bundle id>` stream, and is
/// copied to the user's stream in the append of the post that brings its transaction
/// (`RecordAppStoreFacts`). Its `appAccountToken` routes it only through a binding the app's
/// server made (`AppAccountTokenBound`), and only after a grace period in which the device's own
/// post may take it (`WaitingNotifications`): a token is chosen by the client, so whoever posts
/// first with it must not claim another's purchase. Types the ledger does not act on are recorded
/// all the same. Apple retries until it is answered 200, so the same notification again records
/// nothing and answers where it is.
public struct TakeInNotification: Sendable {
    /// What became of a notification.
    public struct Outcome: Sendable {
        public enum Kind: String, Sendable {
            /// On its user's stream; or, for a notification about no transaction of anyone (a
            /// TEST, an external purchase token, a consent rescinded, a summary of renewal
            /// extensions), on the app's notifications stream, with no user.
            case recorded
            /// On the app's notifications stream, until its user appears.
            case waiting
            /// Recorded before (Apple's retry): nothing new.
            case duplicate
        }

        public let kind: Kind
        /// The user it was recorded for; nil while it waits.
        public let userId: String?
        public let position: Int64
        public let recorded: [RecordedFact]
    }

    let handler: UserCommandHandler
    let store: any EventStore
    let inbox: any NotificationInbox
    let directory: any AppDirectory
    let logger: Logger

    public init(
        handler: UserCommandHandler, inbox: any NotificationInbox, directory: any AppDirectory, logger: Logger
    ) {
        self.handler = handler
        self.store = handler.store
        self.inbox = inbox
        self.directory = directory
        self.logger = logger
    }

    /// Records `notification` (kept as `document`) for whoever it belongs to, or has it wait.
    /// Throws `NotificationIntakeError` for a notification the log could not hold or an app that
    /// is not registered; nothing is recorded then.
    public func callAsFunction(
        _ notification: AppStoreNotificationReceived, document: AppStoreDocument, app: String, metadata: [String: String]
    ) async throws -> Outcome {
        try Self.checkRecordable(notification, app: app)
        let environment = notification.environment
        let key = try AppStoreNotificationReceived.key(app: app, environment: environment, uuid: notification.notificationUUID)
        // One statement: recorded before (Apple's retry), or whose transaction it is.
        let found = try await inbox.lookup(key, transactionIDs: Self.transactionIDs(of: notification), app: app, environment: environment)
        if let earlier = found.earlier {
            return Outcome(kind: .duplicate, userId: Self.user(earlier.streamID, app: app), position: earlier.position, recorded: [])
        }
        if let user = found.holder {
            return try await record(notification, for: user, app: app, document: document, metadata: metadata)
        }
        // A user of the app holding its transaction shows the app is registered; with none, it must be.
        guard try await directory.isRegistered(app) else { throw NotificationIntakeError.unknownApp(app) }
        // Nobody holds it yet: it waits, in the log, for its user (or, about nobody, is the app's).
        let event = try NewEvent(notification, metadata: metadata, deduplicationKey: key)
        let result = try await store.append([event], to: try StreamID.notifications(app: app), expecting: .any, keeping: document)
        switch result.outcomes.first {
        case .appended(let position, _):
            let recorded = [RecordedFact(PendingEvent(.appStoreNotificationReceived(notification)), position: position)]
            // About no transaction of anyone: the app's own, recorded for it.
            guard !Self.transactionIDs(of: notification).isEmpty || notification.appAccountToken != nil else {
                logger.info("notification recorded for the app", metadata: [
                    "ledger.app": "\(app)", "ledger.notification": "\(notification.notificationUUID)", "ledger.type": "\(notification.notificationType)",
                ])
                return Outcome(kind: .recorded, userId: nil, position: position, recorded: recorded)
            }
            logger.info("notification waits for its user", metadata: [
                "ledger.app": "\(app)", "ledger.notification": "\(notification.notificationUUID)", "ledger.type": "\(notification.notificationType)",
            ])
            // The user may have posted the transaction while it was being appended: then it goes to them now.
            if let user = try await inbox.holder(of: Self.transactionIDs(of: notification), app: app, environment: notification.environment) {
                return try await record(notification, for: user, app: app, document: document, metadata: metadata, applied: true)
            }
            return Outcome(kind: .waiting, userId: nil, position: position, recorded: recorded)
        case .duplicate(let stored):
            return Outcome(kind: .duplicate, userId: Self.user(stored.streamID, app: app), position: stored.position, recorded: [])
        case nil:
            throw StoreError.integrity("the notification's append gave no outcome")
        }
    }

    /// Copies a notification waiting on the app's stream to `user` (who now holds its transaction,
    /// or whom the app's server bound its token to), with what it says that is news there.
    public func deliver(_ notification: AppStoreNotificationReceived, to user: String, app: String, metadata: [String: String]) async throws -> Outcome {
        try await record(notification, for: user, app: app, document: nil, metadata: metadata, applied: true)
    }

    private func record(
        _ notification: AppStoreNotificationReceived, for user: String, app: String, document: AppStoreDocument?,
        metadata: [String: String], applied: Bool = false
    ) async throws -> Outcome {
        let outcome = try await handler.execute(app: app, user: user, metadata: metadata, keeping: document) { state, _ in
            guard !state.facts.notifications.contains(where: { $0.uuid == notification.notificationUUID }) else { return ([], ()) }
            let events = try UserDecisions.observeNotification(notification, app: app, applied: applied, digest: ContentHash.sha256Hex, on: state)
            return (events, ())
        }
        var recorded: [RecordedFact] = []
        for (event, result) in zip(outcome.events, outcome.append?.outcomes ?? []) {
            if case .appended(let position, _) = result { recorded.append(RecordedFact(event, position: position, state: outcome.state)) }
        }
        guard let first = recorded.first else {
            // Recorded before, or Apple's retry raced this one and lost: it is in the log once.
            let position = try await handler.position(of: outcome, app: app, user: user)
            return Outcome(kind: .duplicate, userId: user, position: position, recorded: [])
        }
        return Outcome(kind: .recorded, userId: user, position: first.position, recorded: recorded)
    }

    /// The notification's transaction and its original: whoever holds either holds the notification.
    static func transactionIDs(of notification: AppStoreNotificationReceived) -> [String] {
        [notification.transaction.flatMap { AppStoreFields($0).transactionId }, notification.originalTransactionId].compactMap { $0 }
    }

    /// The user of a stream of the app, nil for any other stream.
    static func user(_ stream: String, app bundleID: String) -> String? {
        guard case .user(let app, let user) = StreamID.kind(of: stream), app == bundleID else { return nil }
        return user
    }

    /// A notification the log could not hold is refused before anything of it is kept.
    static func checkRecordable(_ notification: AppStoreNotificationReceived, app: String) throws(NotificationIntakeError) {
        let texts = [notification.notificationUUID, notification.notificationType, notification.subtype ?? ""]
            + notification.fields.flatMap { [$0.key, $0.value] }
        guard !texts.contains(where: { $0.unicodeScalars.contains("\u{0}") }) else {
            throw .unrecordable("the notification holds the NUL character (\\u0000), which the ledger cannot store; nothing was recorded")
        }
        do {
            _ = try AppStoreNotificationReceived.key(app: app, environment: notification.environment, uuid: notification.notificationUUID)
        } catch {
            throw .unrecordable("the notificationUUID '\(notification.notificationUUID.prefix(80))' cannot key a record (\(error.message)); nothing was recorded")
        }
        do {
            try notification.answer.checkRecordable(app: app)
        } catch {
            throw .unrecordable(error.message)
        }
    }
}

/// A notification the ledger cannot take in; nothing of it was recorded.
public struct NotificationIntakeError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: String, Sendable, Hashable {
        /// The notification holds what the log cannot store.
        case unrecordable = "invalid_notification"
        /// No app of that bundle id is registered.
        case unknownApp = "unknown_app"
    }

    public let code: Code
    public let message: String

    public static func unrecordable(_ message: String) -> Self {
        Self(code: .unrecordable, message: message)
    }

    public static func unknownApp(_ app: String) -> Self {
        Self(code: .unknownApp, message: "no app '\(app)' is registered with this ledger (ledger apps add); nothing was recorded")
    }

    public var description: String { message }
}
