import AppStore
import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerStore
import Logging

extension LedgerAPI {
    struct ReceiptBody: Decodable, Sendable {
        let userId: String
        let deviceId: String
        let receiptData: String
        let price: String?
        let currency: String?
    }

    /// Absent ids are written as null, so every item has the same keys.
    struct RecordedItem: Encodable, Sendable {
        @NullWhenAbsent var transactionId: String?
        @NullWhenAbsent var productId: String?
        /// What the fold makes of the recorded fact now: purchase, renewal, upgrade, crossgrade,
        /// restore (a new observation); refund, expiry_report, update (a changed one); receipt,
        /// history (a fetch from the App Store Server API), notification, renewal_info; and for other commands device, finish, failure, consumption, revocation,
        /// subscription_restore.
        let kind: String
        let position: Int64
    }

    struct DuplicateItem: Encodable, Sendable {
        let transactionId: String
        let position: Int64
    }

    /// A transaction of the receipt this post did not record, and why.
    struct NotRecordedItem: Encodable, Sendable {
        let transactionId: String
        /// held_by_another_user: another user of the app posted it (or its original transaction) first; it stays theirs.
        let reason: String
        let message: String
    }

    /// `POST /v1/apps/{bundleId}/receipts`: verifies a receipt with the App Store and records what
    /// it said: each transaction the user's stream has not seen, or has seen with other fields, as
    /// a fact, with the post itself. It judges nothing: the answer says what the fold makes of the
    /// facts now.
    ///
    /// Nothing is written before the App Store has answered. The receipt and the answer are kept
    /// first (content-addressed), then the facts are one append: when the App Store is down the
    /// answer is a 503 and the log is untouched, so the same POST later simply succeeds. Posting a
    /// receipt again records nothing new. Transactions another user of the app holds are left
    /// to them and listed in `notRecorded`; a post refused (409 `owned_by_another_user`) records
    /// nothing, and keeps neither the receipt nor the answer unless the refusal came from the append.
    func ingestReceipt(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let (body, _) = try await APIJSON.decode(ReceiptBody.self, from: request, limit: APILimits.receiptBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateIdentifier(body.userId, field: "userId")
        try Self.validateIdentifier(body.deviceId, field: "deviceId")
        try Self.validatePrice(body.price, currency: body.currency)
        guard !body.receiptData.isEmpty, body.receiptData.utf8.count <= APILimits.receiptDataCharacters else {
            throw APIError.invalidRequest("receiptData must be the base64 receipt, 1 to \(APILimits.receiptDataCharacters) characters", field: "receiptData")
        }
        try Self.validateText(body.receiptData, field: "receiptData")
        guard Data(base64Encoded: body.receiptData, options: .ignoreUnknownCharacters) != nil else {
            throw APIError.invalidRequest("receiptData is not base64: send the receipt exactly as StoreKit gives it", field: "receiptData")
        }

        let receipt = try await verify(body.receiptData, app: app, context: context)
        let answer = receipt.appStoreAnswer
        let document = ReceiptArchive.Document(
            app: app, receiptHash: answer.receiptHash, receiptData: body.receiptData, answerHash: answer.answerHash,
            environment: answer.environment.rawValue, status: answer.status, answeredAt: answer.answeredAt, answer: receipt.answer
        )
        return try await record(answer, document: document, app: app, userId: body.userId, deviceId: body.deviceId,
                                price: body.price, currency: body.currency, context)
    }

    /// Records what an App Store answer (a verified receipt, or a verified StoreKit 2
    /// transaction) says for a user's device, and answers what was recorded.
    ///
    /// The document is kept before any fact that names it is appended, and only then: a post
    /// refused before its append keeps nothing. Transactions another user holds are left out: a
    /// transaction is held elsewhere when its own id is, or its original's (a renewal, upgrade or
    /// restore of another user's purchase, on a shared device's receipt, is theirs too). Any other
    /// fact of the post keyed by what another user recorded first (renewal info naming the same
    /// original transaction with the same fields) refuses the post (409) before anything is kept.
    /// When another user's post of one of them lands between these checks and the append, the
    /// append records nothing and the post is decided again. Notifications that waited for these
    /// transactions' user (`NotificationRouting`) are copied to the user's stream in the same append.
    func record(
        _ answer: AppStoreAnswer, document: ReceiptArchive.Document, app: String, userId: String, deviceId: String,
        price: String?, currency: String?, _ context: LedgerRequestContext
    ) async throws -> Response {
        var recording = try await recordFacts(answer, document: document, app: app, userId: userId, deviceId: deviceId, price: price,
                                              currency: currency, metadata: Self.metadata(context), logger: context.logger)
        // A restore of a purchase the ledger never saw: Apple's history of it, when the app has a key.
        if let backfilled = await backfillUnknownOrigins(of: recording, app: app, user: userId, environment: answer.environment,
                                                         metadata: Self.metadata(context), logger: context.logger) {
            recording.recorded += backfilled.recorded
            recording.position = max(recording.position, backfilled.position)
            recording.state = backfilled.state
            recording.catalog = backfilled.catalog
        }
        struct Answer: Encodable {
            let position: Int64
            let environment: String
            let recorded: [RecordedItem]
            let duplicates: [DuplicateItem]
            let notRecorded: [NotRecordedItem]
            let entitlements: EntitlementsBody
        }
        return try APIJSON.response(Answer(
            position: recording.position, environment: answer.environment.rawValue, recorded: recording.recorded,
            duplicates: recording.duplicates, notRecorded: recording.notRecorded,
            entitlements: EntitlementsBody(userId: userId, position: recording.position, state: recording.state, catalog: recording.catalog)
        ))
    }

    /// What recording an answer did.
    struct Recording: Sendable {
        var position: Int64
        var recorded: [RecordedItem]
        var duplicates: [DuplicateItem]
        var notRecorded: [NotRecordedItem]
        var state: UserLedger
        var catalog: ProductCatalog
    }

    /// `record`'s work, for any caller (the HTTP routes, `ledger appstore backfill`).
    func recordFacts(
        _ answer: AppStoreAnswer, document: ReceiptArchive.Document, app: String, userId: String, deviceId: String,
        price: String?, currency: String?, metadata: [String: String], logger: Logger
    ) async throws -> Recording {
        // An answer the log could not hold is refused before anything of it is kept.
        try answer.checkRecordable(app: app)
        let keep = { try await receipts.keep(document) }
        let fields = answer.transactions.map(AppStoreFields.init)
        let claimed = Array(Set(fields.flatMap { [$0.transactionId, $0.originalTransactionId].compactMap { $0 } }))
        let originals = Array(Set(fields.compactMap { $0.originalTransactionId ?? $0.transactionId }))
        let tokens = Array(Set(fields.compactMap { $0["appAccountToken"] }))
        var attempt = 0
        var elsewhere: [String: Int64]
        var outcome: UserCommandHandler<PostgresEventStore>.Outcome<[DuplicateItem]>
        while true {
            attempt += 1
            // Both lookups at once: the post waits for one round trip, not two.
            async let heldLookup = handler.transactionsHeldElsewhere(claimed, app: app, environment: answer.environment, user: userId)
            async let waitingLookup = notificationRouting.waiting(app: app, environment: answer.environment, originals: originals, tokens: tokens)
            let held = try await heldLookup
            elsewhere = [:]
            for transaction in fields {
                guard let id = transaction.transactionId else { continue }
                if let position = held[id] ?? transaction.originalTransactionId.flatMap({ held[$0] }) {
                    elsewhere[id] = position
                }
            }
            // What waits for a transaction another user holds is theirs, not this user's.
            let theirs = Set(fields.filter { $0.transactionId.map { elsewhere[$0] != nil } ?? false }
                .compactMap { $0.originalTransactionId ?? $0.transactionId })
            let waiting = try await waitingLookup.filter { !theirs.contains($0.originalTransactionId ?? "") }
            do {
                outcome = try await handler.execute(app: app, user: userId, metadata: metadata, beforeAppend: keep) { [elsewhere] state, _ in
                    let decision = try UserDecisions.observeReceipt(
                        answer, app: app, deviceId: deviceId, price: price, currency: currency,
                        excluding: Set(elsewhere.keys), digest: AppStoreReceiptVerifier.sha256Hex, on: state
                    )
                    let duplicates = decision.duplicates.map { DuplicateItem(transactionId: $0, position: state.transactions[$0]?.position ?? 0) }
                    let applied = try Self.applyWaiting(waiting, app: app, after: decision.events, on: state)
                    return (decision.events + applied, duplicates)
                }
                break
            } catch let error as CommandError where error.code == .ownedByAnotherUser && attempt < 3 {
                logger.debug("another user recorded a transaction of the receipt meanwhile; deciding again")
            }
        }

        if outcome.append == nil {
            // Nothing new to record: the receipt and the answer are kept all the same (the same ones
            // again are stored once).
            try await receipts.keep(document)
        }
        var recorded: [RecordedItem] = []
        var duplicates = outcome.value
        if let append = outcome.append {
            for (event, result) in zip(outcome.events, append.outcomes) {
                switch result {
                case .appended(let position, _):
                    recorded.append(RecordedItem(event, position: position, state: outcome.state))
                case .duplicate(let stored):
                    if case .appStoreTransactionObserved(let observed) = event.event {
                        duplicates.append(DuplicateItem(transactionId: observed.transactionId, position: stored.position))
                    }
                }
            }
        }
        let notRecorded = elsewhere.keys.sorted().map {
            NotRecordedItem(transactionId: $0, reason: "held_by_another_user",
                            message: "another user of the app posted this transaction (or its original transaction) first; it stays theirs and was not recorded for this user")
        }
        // Nothing new: the answer names where the receipt's transactions already are.
        let position = outcome.append == nil && !duplicates.isEmpty
            ? duplicates.map(\.position).max()!
            : try await position(of: outcome, app: app, user: userId)
        return Recording(position: position, recorded: recorded, duplicates: duplicates.sorted { $0.position < $1.position },
                         notRecorded: notRecorded, state: outcome.state, catalog: outcome.catalog)
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
            let copied = try UserDecisions.observeNotification(notification, app: app, applied: true, digest: AppStoreReceiptVerifier.sha256Hex, on: next)
            for event in copied { next.apply(event.event, version: next.version + 1) }
            applied += copied
        }
        return applied
    }

    /// Asks the App Store; its refusals become 422, its absence 503.
    private func verify(_ receiptData: String, app: String, context: LedgerRequestContext) async throws -> VerifiedReceipt {
        let secret: String?
        do {
            secret = try await registry.sharedSecret(of: app)
        } catch let error as SecretError {
            // The operator's to fix: the whole story goes to the log, the caller gets a 500 naming the problem.
            context.logger.error("shared secret unreadable", metadata: ["ledger.app": "\(app)", "ledger.error": "\(error.message)"])
            throw error
        }
        // Refusals and outages of the App Store become API errors in APIError+Mapping.swift.
        let receipt = try await verifier.verify(
            ReceiptVerificationRequest(receiptData: receiptData, sharedSecret: secret.map(SharedSecret.init)), logger: context.logger
        )
        guard receipt.bundleId == app else {
            throw APIError.unprocessable("receipt_of_another_app", "the receipt belongs to \(receipt.bundleId), not \(app); nothing was recorded")
        }
        return receipt
    }

    static func validatePrice(_ price: String?, currency: String?) throws {
        guard (price == nil) == (currency == nil) else {
            throw APIError.invalidRequest("price and currency go together: send both (from the device's product info) or neither",
                                          field: price == nil ? "price" : "currency")
        }
        if let currency, !Product.isCurrencyCode(currency) {
            throw APIError.invalidRequest("currency '\(currency)' is not an ISO 4217 code such as USD", field: "currency")
        }
        if let price, !Product.isDecimal(price) {
            throw APIError.invalidRequest("price '\(price)' is not a decimal amount such as 0.99 (text, not a number)", field: "price")
        }
    }
}

extension LedgerAPI.RecordedItem {
    /// A recorded event as the answer names it; App Store facts by what the fold makes of them in `state`.
    init(_ event: PendingEvent, position: Int64, state: UserLedger? = nil) {
        switch event.event {
        case .appStoreTransactionObserved(let e):
            let transaction = state?.transactions[e.transactionId]
            let kind: String
            if let transaction, transaction.position == position {
                kind = transaction.kind.rawValue
            } else if let transaction, transaction.revokedPosition == position {
                kind = "refund"
            } else {
                kind = e.status == 21006 ? "expiry_report" : "update"
            }
            self.init(transactionId: e.transactionId, productId: AppStoreFields(e.fields).productId, kind: kind, position: position)
        case .receiptPosted(let e):
            // No device: a history fetched from the App Store Server API.
            self.init(transactionId: nil, productId: nil, kind: e.deviceId.isEmpty ? "history" : "receipt", position: position)
        case .renewalInfoObserved(let e): self.init(transactionId: e.originalTransactionId, productId: nil, kind: "renewal_info", position: position)
        case .purchaseRecorded(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "purchase", position: position)
        case .subscriptionRenewed(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "renewal", position: position)
        case .purchaseRestored(let e): self.init(transactionId: e.transactionId, productId: e.productId, kind: "restore", position: position)
        case .purchaseRevoked(let e): self.init(transactionId: e.transactionId, productId: nil, kind: "revocation", position: position)
        case .deviceRegistered: self.init(transactionId: nil, productId: nil, kind: "device", position: position)
        case .transactionFinished(let e): self.init(transactionId: e.transactionId, productId: nil, kind: "finish", position: position)
        case .purchaseFailed(let e): self.init(transactionId: nil, productId: e.productId, kind: "failure", position: position)
        case .itemConsumed(let e): self.init(transactionId: nil, productId: e.productId, kind: "consumption", position: position)
        case .subscriptionRestoredToDevice: self.init(transactionId: nil, productId: nil, kind: "subscription_restore", position: position)
        case .subscriptionExpiryReported(let e):
            self.init(transactionId: e.transactionId, productId: nil, kind: "expiry_report", position: position)
        case .appStoreNotificationReceived(let e):
            let fields = e.transaction.map(AppStoreFields.init)
            self.init(transactionId: fields?.transactionId ?? e.originalTransactionId, productId: fields?.productId, kind: "notification", position: position)
        }
    }
}
