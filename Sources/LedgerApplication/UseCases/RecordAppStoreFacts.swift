import Foundation
import LedgerDomain
import Logging

/// Records what an App Store answer says for a user: a verified receipt, a verified StoreKit 2
/// transaction, or a history fetched from the App Store Server API. Called alike by the receipts
/// and transactions routes, `ledger appstore backfill`, the demo's replay story and the seeder.
///
/// It judges nothing: each transaction the user's stream has not seen, or has seen with other
/// fields, becomes a fact (`UserDecisions.observeReceipt`), and the answer says what the fold makes
/// of the facts now. The document is kept by the append of the facts that name it (or on its own
/// when there are none): a refused post keeps nothing.
///
/// A transaction belongs to the first user of the app who posts it. Transactions another user
/// holds are left out and listed in `notRecorded` (a transaction is held elsewhere when its own id
/// is, or its original's: a renewal, upgrade or restore of another user's purchase is theirs too).
/// Any other fact of the post keyed by what another user recorded first refuses the post
/// (`CommandError.ownedByAnotherUser`): its append records and keeps nothing. When another user's
/// post of a transaction lands between the lookup and the append, the append records nothing and
/// the post is decided again. Notifications that waited for these transactions' user (`NotificationInbox`)
/// are copied to the user's stream in the same append.
public struct RecordAppStoreFacts: Sendable {
    /// What recording an answer did.
    public struct Recording: Sendable {
        /// Where the log holds what the post says: its append's position, or for a post that
        /// records nothing the furthest position of the facts it repeats.
        public var position: Int64
        public var recorded: [RecordedFact]
        /// Transactions the stream already held as the post says them, each where it is recorded.
        public var duplicates: [Duplicate]
        /// Transactions another user of the app holds, left to them.
        public var notRecorded: [String]
        /// The user's stream after the post, and the catalog it was judged with.
        public var state: UserLedger
        public var catalog: ProductCatalog
    }

    /// A transaction the post repeats, and where the log holds it.
    public struct Duplicate: Sendable, Hashable {
        public let transactionId: String
        public let position: Int64
    }

    /// What a decision on the post found: the transactions it repeats, and those another user holds.
    struct Decided: Sendable {
        let duplicates: [Duplicate]
        let elsewhere: [String: Int64]
    }

    /// Who posted and what came with the answer besides Apple's fields.
    public struct Post: Sendable {
        public let app: String
        public let userId: String
        /// The device that posted it; empty for what came from Apple alone (a history).
        public let deviceId: String
        /// The price and currency the device reported with a receipt (StoreKit's unit price).
        public let price: String?
        public let currency: String?
        /// Stored with every event the post appends: where it came from.
        public let metadata: [String: String]

        public init(app: String, userId: String, deviceId: String, price: String? = nil, currency: String? = nil, metadata: [String: String]) {
            self.app = app
            self.userId = userId
            self.deviceId = deviceId
            self.price = price
            self.currency = currency
            self.metadata = metadata
        }
    }

    let handler: UserCommandHandler
    let archive: any DocumentArchive
    let inbox: any NotificationInbox
    /// Apple's history of a purchase the ledger never saw, queued after a post that restores or
    /// renews it and fetched out of the post's way; nil to leave that to `ledger appstore backfill`.
    let origins: OriginBackfills?
    let logger: Logger

    public init(
        handler: UserCommandHandler, archive: any DocumentArchive, inbox: any NotificationInbox, origins: OriginBackfills? = nil,
        logger: Logger
    ) {
        self.handler = handler
        self.archive = archive
        self.inbox = inbox
        self.origins = origins
        self.logger = logger
    }

    /// Records the answer for the post's user, then queues the fetch of Apple's history of any
    /// purchase the post renews or restores that the stream never saw (done when the app has a
    /// Server API key, out of the post's way).
    public func callAsFunction(_ answer: AppStoreAnswer, document: AppStoreDocument, post: Post) async throws -> Recording {
        let recording = try await record(answer, document: document, post: post)
        if let origins { await origins.enqueue(origins: recording, post: post, environment: answer.environment) }
        return recording
    }

    /// Records the answer for the post's user, and nothing else.
    public func record(_ answer: AppStoreAnswer, document: AppStoreDocument, post: Post) async throws -> Recording {
        let app = post.app
        // An answer the log could not hold is refused before anything of it is kept.
        try answer.checkRecordable(app: app)
        let fields = answer.transactions.map(AppStoreFields.init)
        let claimed = Array(Set(fields.flatMap { [$0.transactionId, $0.originalTransactionId].compactMap { $0 } }))
        let originals = Array(Set(fields.compactMap { $0.originalTransactionId ?? $0.transactionId }))
        let tokens = Array(Set(fields.compactMap { $0["appAccountToken"].flatMap(AppAccountToken.normalized) }))
        let claims = UserCommandHandler.claims(of: claimed, app: app, environment: answer.environment)
        var attempt = 0
        var outcome: UserCommandHandler.Outcome<Decided>
        while true {
            attempt += 1
            let waiting = try await inbox.waiting(app: app, environment: answer.environment, originals: originals, tokens: tokens)
            do {
                // Who holds the post's transactions is read with the user's stream, in one statement.
                outcome = try await handler.execute(
                    app: app, user: post.userId, metadata: post.metadata, keeping: document, lookingUp: Array(claims.keys)
                ) { state, _, found in
                    let held = try UserCommandHandler.heldElsewhere(claims, found: found, app: app, user: post.userId)
                    var elsewhere: [String: Int64] = [:]
                    for transaction in fields {
                        guard let id = transaction.transactionId else { continue }
                        if let position = held[id] ?? transaction.originalTransactionId.flatMap({ held[$0] }) {
                            elsewhere[id] = position
                        }
                    }
                    // What waits for a transaction another user holds is theirs, not this user's.
                    let theirs = Set(fields.filter { $0.transactionId.map { elsewhere[$0] != nil } ?? false }
                        .compactMap { $0.originalTransactionId ?? $0.transactionId })
                    let decision = try UserDecisions.observeReceipt(
                        answer, app: app, deviceId: post.deviceId, price: post.price, currency: post.currency,
                        excluding: Set(elsewhere.keys), digest: ContentHash.sha256Hex, on: state
                    )
                    // Where the log holds what the post repeats: the latest observation, which may be a refund's.
                    let duplicates = decision.duplicates.map { Duplicate(transactionId: $0, position: state.facts.observed[$0]?.latest.position ?? 0) }
                    // A notification found by its token alone is this user's only when the app's
                    // server bound the token to them: a client chooses its own token.
                    let mine = waiting.filter { notification in
                        !theirs.contains(notification.originalTransactionId ?? "")
                            && (notification.originalTransactionId.map(originals.contains) == true
                                || notification.appAccountToken.flatMap(AppAccountToken.normalized).map(state.boundTokens.contains) == true)
                    }
                    let applied = try Self.applyWaiting(mine, app: app, after: decision.events, on: state)
                    return (decision.events + applied, Decided(duplicates: duplicates, elsewhere: elsewhere))
                }
                break
            } catch let error as CommandError where error.code == .ownedByAnotherUser && attempt < 3 {
                logger.debug("another user recorded a transaction of the receipt meanwhile; deciding again")
            }
        }
        let elsewhere = outcome.value.elsewhere

        if outcome.append == nil {
            // Nothing new to record: the receipt and the answer are kept all the same (the same ones
            // again are stored once).
            try await archive.keep(document)
        }
        var recorded: [RecordedFact] = []
        var duplicates = outcome.value.duplicates
        if let append = outcome.append {
            for (event, result) in zip(outcome.events, append.outcomes) {
                switch result {
                case .appended(let position, _):
                    recorded.append(RecordedFact(event, position: position, state: outcome.state))
                case .duplicate(let stored):
                    if case .appStoreTransactionObserved(let observed) = event.event {
                        duplicates.append(Duplicate(transactionId: observed.transactionId, position: stored.position))
                    }
                }
            }
        }
        // Nothing new: the answer names where the receipt's transactions already are.
        let position = outcome.append == nil && !duplicates.isEmpty
            ? duplicates.map(\.position).max()!
            : try await handler.position(of: outcome, app: app, user: post.userId)
        return Recording(position: position, recorded: recorded, duplicates: duplicates.sorted { $0.position < $1.position },
                         notRecorded: elsewhere.keys.sorted(), state: outcome.state, catalog: outcome.catalog)
    }

    /// The waiting notifications' facts for a user's stream, after `events` (decided on `state`):
    /// each notification the stream does not hold yet, copied with what it says that is news.
    static func applyWaiting(
        _ waiting: [AppStoreNotificationReceived], app: String, after events: [PendingEvent], on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard !waiting.isEmpty else { return [] }
        var next = state
        for event in events { next.apply(event.event, version: next.version + 1) }
        var applied: [PendingEvent] = []
        for notification in waiting where !next.facts.notifications.contains(where: { $0.uuid == notification.notificationUUID }) {
            let copied = try UserDecisions.observeNotification(notification, app: app, applied: true, digest: ContentHash.sha256Hex, on: next)
            for event in copied { next.apply(event.event, version: next.version + 1) }
            applied += copied
        }
        return applied
    }
}
