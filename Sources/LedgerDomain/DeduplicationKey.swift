/// A key under which a fact is recorded at most once, for ever.
///
/// For App Store transactions the key is the app, the environment, the kind of record and the
/// App Store transaction id: posting the same receipt twice, or 64 times at once, records one event.
public struct DeduplicationKey: Hashable, Sendable, CustomStringConvertible {
    /// What was recorded of an App Store transaction: each kind is recorded at most once.
    /// (Logs written before facts were recorded also hold `revocation` and `expiry_report` keys,
    /// which nothing looks up.)
    public enum AppStoreKind: String, Hashable, Sendable, CaseIterable {
        /// Version 1 only: a purchase as then judged at ingest.
        case payment
        /// Version 1 only: a renewal as then judged at ingest.
        case renewal
        /// Version 1 only: a restore as then judged at ingest.
        case restore
        /// The first observation of a transaction: which user's stream it belongs to.
        case transaction
        /// A later observation of a transaction whose fields changed (keyed by their digest).
        case observation
        /// A post of a receipt that brought new observations (keyed by the decision's digest).
        case post
        /// A `pending_renewal_info` entry of an original transaction (keyed by its fields' digest).
        case renewalInfo = "renewal_info"
        /// An App Store Server Notification, by its `notificationUUID`: where it was first recorded.
        case notification
        /// A notification copied from the app's notifications stream to the user who appeared for it.
        case notificationApplied = "notification_applied"
        /// A notification that waited on the app's notifications stream past its time, unclaimed.
        case notificationExpired = "notification_expired"
        /// What was told Apple about a CONSUMPTION_REQUEST, by its notification's UUID: once.
        case consumptionAnswer = "consumption_answer"

        /// The kinds under which a transaction was claimed by a user's stream, old and new: the
        /// first observation, and before facts were recorded, the verdicts.
        public static let claims: [AppStoreKind] = [.transaction, .payment, .renewal, .restore]
    }

    public let rawValue: String

    public init(rawValue: String) throws(LedgerInputError) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= 512 else {
            throw .invalidDeduplicationKey("it must have 1 to 512 bytes")
        }
        guard !rawValue.unicodeScalars.contains(where: \.isControlCharacter) else {
            throw .invalidDeduplicationKey("it must not contain control characters")
        }
        self.rawValue = rawValue
    }

    /// The key of an App Store transaction: `appstore/<bundle id>/<environment>/<kind>/<transaction id>`.
    public static func appStoreTransaction(
        app bundleID: String,
        environment: StoreEnvironment,
        kind: AppStoreKind,
        transactionID: String
    ) throws(LedgerInputError) -> DeduplicationKey {
        for (name, value) in [("bundle id", bundleID), ("transaction id", transactionID)]
        where value.isEmpty || value.contains("/") {
            throw .invalidDeduplicationKey("\(name) '\(value)' must be non-empty and contain no '/'")
        }
        return try DeduplicationKey(rawValue: "appstore/\(bundleID)/\(environment.rawValue)/\(kind.rawValue)/\(transactionID)")
    }

    /// Every key under which a user's stream may have claimed the transaction in `environment`
    /// (see `AppStoreKind.claims`); none when the ids cannot form a key.
    public static func claimsOf(transactionID: String, app bundleID: String, environment: StoreEnvironment) -> [DeduplicationKey] {
        AppStoreKind.claims.compactMap {
            try? appStoreTransaction(app: bundleID, environment: environment, kind: $0, transactionID: transactionID)
        }
    }

    /// The binding of an `appAccountToken` to a user of the app: `token/<bundle id>/<token>`, once
    /// per app, so a token is one user's for ever.
    public static func appAccountToken(app bundleID: String, token: String) throws(LedgerInputError) -> DeduplicationKey {
        guard !bundleID.isEmpty, !bundleID.contains("/"), let normalized = AppAccountToken.normalized(token) else {
            throw .invalidDeduplicationKey("an app account token key needs a bundle id without '/' and a UUID token")
        }
        return try DeduplicationKey(rawValue: "token/\(bundleID)/\(normalized)")
    }

    /// A content-addressed App Store key: `appstore/<bundle id>/<environment>/<kind>/<id>/<digest>`.
    public static func appStoreFact(
        app bundleID: String,
        environment: StoreEnvironment,
        kind: AppStoreKind,
        id: String,
        digest: String
    ) throws(LedgerInputError) -> DeduplicationKey {
        let key = try appStoreTransaction(app: bundleID, environment: environment, kind: kind, transactionID: id)
        guard !digest.isEmpty, !digest.contains("/") else { throw .invalidDeduplicationKey("digest '\(digest)' must be non-empty and contain no '/'") }
        return try DeduplicationKey(rawValue: "\(key.rawValue)/\(digest)")
    }

    /// A sales report file of an app, by the SHA-256 of its bytes: `sales-report/<bundle id>/<hash>`,
    /// so importing the same file again records nothing.
    public static func salesReport(app bundleID: String, contentHash: String) throws(LedgerInputError) -> DeduplicationKey {
        guard !bundleID.isEmpty, !bundleID.contains("/"), !contentHash.isEmpty, !contentHash.contains("/") else {
            throw .invalidDeduplicationKey("a sales report key needs a bundle id and a hash without '/'")
        }
        return try DeduplicationKey(rawValue: "sales-report/\(bundleID)/\(contentHash)")
    }

    /// The key of a client's command, from its `Idempotency-Key` (scoped to the app):
    /// `command/<bundle id>/<key>`, or the key's `digest` (hex) when the whole would pass 512 bytes. Set
    /// on the command's first event, it makes the append itself the claim: a command retried
    /// after a crash, a lost answer or alongside its twin is recorded once.
    public static func command(
        app bundleID: String, idempotencyKey key: String, digest: (String) -> String
    ) throws(LedgerInputError) -> DeduplicationKey {
        guard !bundleID.isEmpty, !bundleID.contains("/") else {
            throw .invalidDeduplicationKey("bundle id '\(bundleID)' must be non-empty and contain no '/'")
        }
        let plain = "command/\(bundleID)/\(key)"
        if plain.utf8.count <= 512 { return try DeduplicationKey(rawValue: plain) }
        return try DeduplicationKey(rawValue: "command/\(bundleID)/sha256:\(digest(key))")
    }

    public var description: String { rawValue }
}

extension Unicode.Scalar {
    /// A control character (general category Cc: U+0000–U+001F and U+007F–U+009F), told by its
    /// value rather than by looking up its Unicode properties.
    public var isControlCharacter: Bool {
        value < 0x20 || (0x7F...0x9F).contains(value)
    }
}
