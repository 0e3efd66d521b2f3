import Foundation

/// An event a decision wants appended, with the key that keeps it from being recorded twice.
public struct PendingEvent: Hashable, Sendable {
    public let event: UserEvent
    public let deduplicationKey: DeduplicationKey?

    public init(_ event: UserEvent, deduplicationKey: DeduplicationKey? = nil) {
        self.event = event
        self.deduplicationKey = deduplicationKey
    }
}

/// What recording a receipt decided.
public struct ReceiptDecision: Hashable, Sendable {
    public let events: [PendingEvent]
    /// Transactions of the receipt the stream already holds, with the same fields.
    public let duplicates: [String]
}

/// An App Store answer, as the decisions read it: every field of every transaction and
/// `pending_renewal_info` entry as Apple sent it.
public struct AppStoreAnswer: Hashable, Sendable {
    public let receiptHash: String
    public let answerHash: String
    public let environment: StoreEnvironment
    public let status: Int
    public let answeredAt: Date
    public let transactions: [[String: String]]
    public let renewalInfo: [[String: String]]

    public init(
        receiptHash: String, answerHash: String, environment: StoreEnvironment, status: Int, answeredAt: Date,
        transactions: [[String: String]], renewalInfo: [[String: String]]
    ) {
        self.receiptHash = receiptHash
        self.answerHash = answerHash
        self.environment = environment
        self.status = status
        self.answeredAt = answeredAt
        self.transactions = transactions
        self.renewalInfo = renewalInfo
    }
}

extension AppStoreAnswer {
    /// Refuses an answer whose facts the log could not hold, so that a caller can check before it
    /// keeps anything of the answer: every transaction needs a `transaction_id`, and it and every
    /// renewal-info entry's `original_transaction_id` must fit in a deduplication key (no '/', no
    /// control characters, not too long); no field may hold U+0000, which PostgreSQL can store
    /// neither in text nor in JSON. `observeReceipt` checks the same.
    public func checkRecordable(app bundleID: String) throws(DecisionError) {
        func check(_ id: String, _ name: String) throws(DecisionError) {
            do {
                // The longest key an id is recorded under: a renewal-info fact with its digest.
                _ = try DeduplicationKey.appStoreFact(app: bundleID, environment: environment, kind: .renewalInfo, id: id,
                                                      digest: String(repeating: "0", count: 64))
            } catch {
                throw .invalidInput("the App Store's answer has a \(name) the ledger cannot record ('\(id.prefix(80))': \(error.message)); nothing of this receipt was recorded")
            }
        }
        for fields in transactions {
            guard let id = AppStoreFields(fields).transactionId else {
                throw .invalidInput("the App Store's answer lists a transaction without transaction_id, so nothing of this receipt was recorded; post it again later")
            }
            try check(id, "transaction_id")
        }
        for entry in renewalInfo {
            if let original = AppStoreFields(entry).originalTransactionId { try check(original, "original_transaction_id") }
        }
        for fields in transactions + renewalInfo {
            if let field = fields.first(where: { $0.key.unicodeScalars.contains("\u{0}") || $0.value.unicodeScalars.contains("\u{0}") }) {
                let name = field.key.unicodeScalars.contains("\u{0}") ? "a field name" : "'\(field.key)'"
                throw .invalidInput("the App Store's answer holds the NUL character (\\u0000) in \(name), which the ledger cannot store; nothing of this receipt was recorded")
            }
            for name in Self.identifierFields {
                if let value = fields[name], value.utf8.count > Self.longestIdentifier {
                    throw .invalidInput(
                        "the App Store's answer has a \(name) of \(value.utf8.count) bytes ('\(value.prefix(40))…'); Apple's are at most \(Self.longestIdentifier) "
                            + "(a product id at most 100 characters), so nothing of this receipt was recorded"
                    )
                }
            }
        }
    }

    /// Apple's identifiers that the log indexes or keys records by, in both namings (verifyReceipt's
    /// and the signed payloads'). App Store Connect allows product ids of up to 100 characters and
    /// the others are shorter still; one longer than `longestIdentifier` bytes cannot be Apple's,
    /// and would outgrow an index entry of the log (PostgreSQL refuses entries over 2,704 bytes).
    static let identifierFields = [
        "product_id", "productId", "auto_renew_product_id", "autoRenewProductId", "original_transaction_id", "originalTransactionId",
        "web_order_line_item_id", "webOrderLineItemId", "app_account_token", "appAccountToken",
    ]
    public static let longestIdentifier = 255
}

/// The decisions taken on one user's stream. Pure: given the stream's state (and the catalog),
/// each returns the events to append or refuses with a `DecisionError`. The caller appends them
/// with the state's version as the expected version and decides again on a conflict.
public enum UserDecisions {
    /// Records what the App Store said, and judges nothing: each transaction the stream has not
    /// seen, or has seen with other fields, is observed; each changed `pending_renewal_info` entry
    /// too; and when anything is new, the post itself (device, reported price). What the facts
    /// mean is the classifier's to say, in the fold. `excluding` are transactions another user of
    /// the app holds (the caller looks them up). `digest` names content in deduplication keys
    /// (SHA-256 hex; the domain does no cryptography).
    public static func observeReceipt(
        _ answer: AppStoreAnswer,
        app bundleID: String,
        deviceId: String,
        price: String? = nil,
        currency: String? = nil,
        excluding: Set<String> = [],
        digest: @escaping (String) -> String,
        on state: UserLedger
    ) throws(DecisionError) -> ReceiptDecision {
        try answer.checkRecordable(app: bundleID)
        let key = FactKeys(app: bundleID, environment: answer.environment, digest: digest)
        let (observations, duplicates, ordered) = try Self.observations(
            of: answer, deviceId: deviceId, excluding: excluding, keys: key, on: state
        )
        guard !observations.isEmpty else { return ReceiptDecision(events: [], duplicates: duplicates) }
        let postContent = ([deviceId, price ?? "", currency ?? ""] + observations.compactMap { $0.deduplicationKey?.rawValue }).joined(separator: "\n")
        let post = PendingEvent(.receiptPosted(ReceiptPosted(
            receiptHash: answer.receiptHash, answerHash: answer.answerHash, deviceId: deviceId, environment: answer.environment,
            status: answer.status, answeredAt: answer.answeredAt, price: price, currency: currency,
            transactionIds: ordered.compactMap(\.transactionId)
        )), deduplicationKey: try key(.post, answer.receiptHash, content: postContent))
        return ReceiptDecision(events: [post] + observations, duplicates: duplicates)
    }

    /// Uses up `quantity` of a consumable; refused beyond the balance the stream holds.
    public static func consume(
        productId: String, quantity: Int, deviceId: String, catalog: ProductCatalog, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard (1...1_000_000).contains(quantity) else { throw .invalidQuantity(quantity) }
        let type = catalog[productId]?.type
            ?? state.transactionsInOrder.first { $0.productId == productId && $0.kind == .purchase }?.productType
            ?? .unknown
        guard type == .consumable else { throw .notConsumable(productId: productId, type: type) }
        let balance = state.balance(of: productId)
        guard quantity <= balance else {
            throw .insufficientBalance(productId: productId, balance: balance, requested: quantity)
        }
        return registerDevice(deviceId, on: state)
            + [PendingEvent(.itemConsumed(ItemConsumed(productId: productId, quantity: quantity, deviceId: deviceId)))]
    }

    /// Support revokes a transaction: what it gave is taken back.
    public static func revoke(
        transactionId: String, revokedAt: Date, reason: String, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        guard let transaction = state.transactions[transactionId] else { throw .unknownTransaction(transactionId) }
        guard !transaction.isRevoked else { throw .alreadyRevoked(transactionId) }
        guard revokedAt >= transaction.purchaseDate else {
            throw .invalidInput("revokedAt \(LedgerJSON.formatTimestamp(revokedAt)) is before transaction \(transactionId) was bought "
                                + "(\(LedgerJSON.formatTimestamp(transaction.purchaseDate))): a purchase cannot be revoked before it was made")
        }
        let trimmed = reason.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty, trimmed.count <= 500 else {
            throw .invalidInput("a revocation needs a reason of 1 to 500 characters, for the audit trail")
        }
        return [PendingEvent(.purchaseRevoked(PurchaseRevoked(transactionId: transactionId, revokedAt: revokedAt, reason: trimmed)))]
    }

    /// Restores every non-renewing period the user paid for to a device, recording which
    /// transactions the device received for the first time.
    public static func restoreNonRenewing(
        toDevice deviceId: String, catalog: ProductCatalog, on state: UserLedger
    ) -> (events: [PendingEvent], periods: [SubscriptionPeriod]) {
        let periods = state.nonRenewingPeriods(catalog: catalog)
        let delivered = state.deliveredToDevice[deviceId, default: []]
        let fresh = periods.map(\.transactionId).filter { !delivered.contains($0) }
        var events = registerDevice(deviceId, on: state)
        if !fresh.isEmpty {
            events.append(PendingEvent(.subscriptionRestoredToDevice(SubscriptionRestoredToDevice(deviceId: deviceId, transactionIds: fresh))))
        }
        return (events, periods)
    }

    /// Binds `token` to the user: nothing when it is bound to them already. The event's key makes
    /// the binding the app's only one for that token (the store answers a duplicate when another
    /// user holds it).
    public static func bindToken(_ token: String, app bundleID: String, on state: UserLedger) throws(DecisionError) -> [PendingEvent] {
        guard let normalized = AppAccountToken.normalized(token) else {
            throw .invalidInput("appAccountToken '\(token.prefix(80))' is not a UUID, which StoreKit requires of it")
        }
        guard !state.boundTokens.contains(normalized) else { return [] }
        let key: DeduplicationKey
        do { key = try .appAccountToken(app: bundleID, token: normalized) } catch { throw .invalidInput(error.message) }
        return [PendingEvent(.appAccountTokenBound(AppAccountTokenBound(token: normalized)), deduplicationKey: key)]
    }

    /// `DeviceRegistered` the first time a device is seen for the user.
    public static func registerDevice(_ deviceId: String, on state: UserLedger) -> [PendingEvent] {
        state.devices.contains(deviceId) ? [] : [PendingEvent(.deviceRegistered(DeviceRegistered(deviceId: deviceId)))]
    }
}

extension UserDecisions {
    /// The app finished a transaction (StoreKit `finishTransaction`). Finishing it again records nothing.
    public static func finish(transactionId: String, deviceId: String, on state: UserLedger) throws(DecisionError) -> [PendingEvent] {
        guard state.transactions[transactionId] != nil else { throw .unknownTransaction(transactionId) }
        guard !state.isFinished(transactionId) else { return [] }
        return registerDevice(deviceId, on: state)
            + [PendingEvent(.transactionFinished(TransactionFinished(transactionId: transactionId, deviceId: deviceId)))]
    }

    /// A purchase the App Store did not complete (failed or cancelled by the user): no money, but support wants to see it.
    public static func recordFailure(
        productId: String, deviceId: String, errorCode: String, cancelled: Bool, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        let code = errorCode.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !code.isEmpty, code.count <= 100 else {
            throw .invalidInput("errorCode must have 1 to 100 characters (the SKError code or its name)")
        }
        return registerDevice(deviceId, on: state) + [PendingEvent(.purchaseFailed(PurchaseFailed(
            productId: productId, deviceId: deviceId, errorCode: code, cancelled: cancelled
        )))]
    }
}

extension PendingEvent {
    /// An observation, and the canonical text whose digest keys it when it records a change.
    struct Observation {
        let event: AppStoreTransactionObserved

        init(_ event: AppStoreTransactionObserved) {
            self.event = event
        }

        var canonical: String { Self.canonical(event.fields, status: event.status) }

        /// The fields as sorted JSON, and the status: equal content, equal text.
        static func canonical(_ fields: [String: String], status: Int) -> String {
            ((try? LedgerJSON.encode(fields)) ?? "") + "\nstatus=\(status)"
        }
    }
}

/// The deduplication keys of one app's App Store facts in one environment.
struct FactKeys {
    let app: String
    let environment: StoreEnvironment
    let digest: (String) -> String

    func callAsFunction(_ kind: DeduplicationKey.AppStoreKind, _ id: String, content: String? = nil) throws(DecisionError) -> DeduplicationKey {
        do {
            if let content {
                return try .appStoreFact(app: app, environment: environment, kind: kind, id: id, digest: digest(content))
            }
            return try .appStoreTransaction(app: app, environment: environment, kind: kind, transactionID: id)
        } catch {
            throw .invalidInput(error.message)
        }
    }
}

extension UserDecisions {
    /// What an answer says that the stream has not recorded: each transaction unseen, or seen
    /// saying something else, and each changed renewal-info entry. `deviceId` is empty for what
    /// came from Apple alone (a notification).
    static func observations(
        of answer: AppStoreAnswer, deviceId: String, excluding: Set<String>, keys key: FactKeys, on state: UserLedger
    ) throws(DecisionError) -> (events: [PendingEvent], duplicates: [String], ordered: [AppStoreFields]) {
        var observations: [PendingEvent] = []
        var duplicates: [String] = []
        let ordered = answer.transactions.map(AppStoreFields.init).sorted {
            ($0.purchaseDate ?? .distantPast, $0.transactionId ?? "") < ($1.purchaseDate ?? .distantPast, $1.transactionId ?? "")
        }
        var seen = Set<String>()
        for fields in ordered {
            guard let id = fields.transactionId, !id.isEmpty else { throw .invalidInput("the App Store's answer lists a transaction without transaction_id, so nothing of this receipt was recorded; post it again later") }
            guard seen.insert(id).inserted, !excluding.contains(id) else { continue }
            let expiryNews = answer.status == 21006 && fields.expiresDate != nil
            let event = PendingEvent.Observation(AppStoreTransactionObserved(
                transactionId: id, environment: answer.environment, fields: fields.values, receiptHash: answer.receiptHash,
                deviceId: deviceId, answeredAt: answer.answeredAt, status: expiryNews ? 21006 : 0
            ))
            if let known = state.facts.observed[id] {
                // An earlier signature of a transaction the stream holds a later signed view of says nothing new.
                let unchanged = (known.fields.saysTheSame(as: fields) || known.isOlder(fields)) && (!expiryNews || known.expiryReportedAt != nil)
                if unchanged {
                    duplicates.append(id)
                    continue
                }
                observations.append(PendingEvent(.appStoreTransactionObserved(event.event),
                                                 deduplicationKey: try key(.observation, id, content: event.canonical)))
            } else {
                observations.append(PendingEvent(.appStoreTransactionObserved(event.event), deduplicationKey: try key(.transaction, id)))
            }
        }
        for entry in answer.renewalInfo.map(AppStoreFields.init) {
            guard let original = entry.originalTransactionId, !excluding.contains(original) else { continue }
            if let known = state.facts.renewalInfo[original], known.saysTheSame(as: entry) { continue }
            let content = PendingEvent.Observation.canonical(entry.values, status: 0)
            observations.append(PendingEvent(.renewalInfoObserved(RenewalInfoObserved(
                originalTransactionId: original, environment: answer.environment, fields: entry.values,
                receiptHash: answer.receiptHash, answeredAt: answer.answeredAt
            )), deduplicationKey: try key(.renewalInfo, original, content: content)))
        }
        return (observations, duplicates, ordered)
    }

    /// Records an App Store notification on the stream of the user who holds its transaction:
    /// the notification itself (once per `notificationUUID`), then what it says of the
    /// transaction and the renewal info that the stream has not recorded. `applied`: the
    /// notification was first recorded on the app's notifications stream, while no user held
    /// its transaction, and is copied here now that one does.
    public static func observeNotification(
        _ notification: AppStoreNotificationReceived, app bundleID: String, applied: Bool = false,
        digest: @escaping (String) -> String, on state: UserLedger
    ) throws(DecisionError) -> [PendingEvent] {
        let answer = notification.answer
        try answer.checkRecordable(app: bundleID)
        let key = FactKeys(app: bundleID, environment: notification.environment, digest: digest)
        let lead = PendingEvent(.appStoreNotificationReceived(notification),
                                deduplicationKey: try key(applied ? .notificationApplied : .notification, notification.notificationUUID))
        let observed = try observations(of: answer, deviceId: "", excluding: [], keys: key, on: state)
        return [lead] + observed.events
    }
}

extension AppStoreNotificationReceived {
    /// The notification as an answer the observations read: its transaction and renewal info.
    public var answer: AppStoreAnswer {
        AppStoreAnswer(receiptHash: payloadHash, answerHash: payloadHash, environment: environment, status: 0, answeredAt: signedDate,
                       transactions: transaction.map { [$0] } ?? [], renewalInfo: renewalInfo.map { [$0] } ?? [])
    }

    /// The key the notification is recorded under, wherever it was first recorded.
    public static func key(app bundleID: String, environment: StoreEnvironment, uuid: String) throws(LedgerInputError) -> DeduplicationKey {
        try .appStoreTransaction(app: bundleID, environment: environment, kind: .notification, transactionID: uuid)
    }
}
