import Crypto
import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO

/// Apps and their API keys. Keys are `lk_<id>_<secret>`; only the SHA-256 of the secret is stored,
/// so a leaked database does not leak working keys. App Store shared secrets are stored sealed
/// with `secrets` (`SecretSealer`), whose key the database never sees.
public struct AppRegistry: AppDirectory, Sendable {

    let client: DatabasePool
    let logger: Logger
    /// Seals and opens shared secrets; nil when no key is configured (then secrets cannot be set,
    /// and only those stored in plaintext before sealing existed can be read).
    let secrets: SecretSealer?
    /// Tokens refused lately, so that a caller repeating a wrong key costs no query.
    let refusedTokens = RefusedTokenCache()
    /// Keys accepted lately, kept while a `ChangeFeed` listens for revocations; nil keeps none.
    let acceptedKeys: AcceptedKeys?

    public init(client: DatabasePool, logger: Logger, secrets: SecretSealer? = nil, acceptedKeys: AcceptedKeys? = nil) {
        self.client = client
        self.logger = logger
        self.secrets = secrets
        self.acceptedKeys = acceptedKeys
    }

    // MARK: Apps

    /// Registers an app, or replaces its shared secret when it is registered. Returns whether it is new.
    /// The secret is stored sealed: without a key, setting one is refused.
    @discardableResult
    public func addApp(_ bundleID: String, sharedSecret: String?) async throws -> Bool {
        try Self.validateBundleID(bundleID)
        var sealed: Data?
        if let sharedSecret {
            guard !sharedSecret.isEmpty, sharedSecret.utf8.count <= 255 else {
                throw AccessError.invalidInput("the shared secret must have 1 to 255 characters")
            }
            guard let secrets else { throw SecretError.noKey("the shared secret of \(bundleID) is stored sealed") }
            sealed = try secrets.seal(sharedSecret, app: bundleID)
        }
        let keyID = sealed == nil ? nil : secrets?.keyID
        // A new secret replaces the old one, plaintext or sealed; no secret leaves the old one as it was.
        // Through the owner's function (migration 0018): the server's role writes no app row itself.
        let rows = try await client.query(
            "SELECT ledger.app_register(\(bundleID), \(sealed), \(keyID))", thenConfirmCommit: true, logger: logger
        )
        for try await inserted in rows.decode(Bool.self) { return inserted }
        return false
    }

    /// Stores (or replaces) the app's App Store Server API key, the private key sealed; refused
    /// without a secret key or for an app that is not registered.
    public func setServerAPIKey(_ key: ServerAPIKey, of bundleID: String) async throws {
        guard let secrets else { throw SecretError.noKey("the App Store Server API key of \(bundleID) is stored sealed") }
        let sealed = try secrets.seal(key.privateKeyPEM, app: Self.serverAPIKeyLabel(bundleID))
        let rows = try await client.query(
            "SELECT ledger.app_set_server_api_key(\(bundleID), \(key.keyID), \(key.issuerID), \(sealed), \(secrets.keyID))", logger: logger
        )
        for try await set in rows.decode(Bool.self) where set { return }
        throw AccessError.unknownApp(bundleID)
    }

    /// The app's App Store Server API key, nil when it has none.
    public func serverAPIKey(of bundleID: String) async throws -> ServerAPIKey? {
        let rows = try await client.query("""
            SELECT server_api_key_id, server_api_issuer_id, server_api_private_key_sealed, server_api_sealed_with
            FROM ledger.apps WHERE bundle_id = \(bundleID)
            """, logger: logger)
        for try await (keyID, issuerID, sealed, sealedWith) in rows.decode((String?, String?, Data?, String?).self) {
            guard let keyID, let issuerID, let sealed, let sealedWith else { return nil }
            guard let secrets else { throw SecretError.noKey("the App Store Server API key of \(bundleID) is sealed with key \(sealedWith)") }
            return ServerAPIKey(keyID: keyID, issuerID: issuerID,
                                privateKeyPEM: try secrets.open(sealed, sealedWith: sealedWith, app: Self.serverAPIKeyLabel(bundleID)))
        }
        throw AccessError.unknownApp(bundleID)
    }

    /// Sets (or replaces) the app's App Store Connect API key and vendor number, the key sealed (migration 0022).
    public func setAppStoreConnectKey(_ key: AppStoreConnectKey, of bundleID: String) async throws {
        guard !key.vendorNumber.isEmpty, key.vendorNumber.count <= 20, key.vendorNumber.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw AccessError.invalidInput("the vendor number is digits (App Store Connect > Payments and Financial Reports shows it), not '\(key.vendorNumber)'")
        }
        guard let secrets else { throw SecretError.noKey("the App Store Connect key of \(bundleID) is stored sealed") }
        let sealed = try secrets.seal(key.privateKeyPEM, app: Self.connectKeyLabel(bundleID))
        let rows = try await client.query("""
            SELECT ledger.app_set_connect_key(\(bundleID), \(key.keyID), \(key.issuerID), \(sealed), \(secrets.keyID), \(key.vendorNumber))
            """, logger: logger)
        for try await set in rows.decode(Bool.self) where set { return }
        throw AccessError.unknownApp(bundleID)
    }

    /// The app's App Store Connect API key, nil when it has none.
    public func appStoreConnectKey(of bundleID: String) async throws -> AppStoreConnectKey? {
        let rows = try await client.query("""
            SELECT connect_key_id, connect_issuer_id, connect_private_key_sealed, connect_sealed_with, connect_vendor_number
            FROM ledger.apps WHERE bundle_id = \(bundleID)
            """, logger: logger)
        for try await (keyID, issuerID, sealed, sealedWith, vendor) in rows.decode((String?, String?, Data?, String?, String?).self) {
            guard let keyID, let issuerID, let sealed, let sealedWith, let vendor else { return nil }
            guard let secrets else { throw SecretError.noKey("the App Store Connect key of \(bundleID) is sealed with key \(sealedWith)") }
            return AppStoreConnectKey(keyID: keyID, issuerID: issuerID,
                                      privateKeyPEM: try secrets.open(sealed, sealedWith: sealedWith, app: Self.connectKeyLabel(bundleID)),
                                      vendorNumber: vendor)
        }
        throw AccessError.unknownApp(bundleID)
    }

    static func connectKeyLabel(_ bundleID: String) -> String { "\(bundleID) App Store Connect key" }

    /// How the app answers Apple's refund questions (migration 0019).
    public func consumptionAnswerSettings(of bundleID: String) async throws -> ConsumptionAnswerSettings {
        let rows = try await client.query("""
            SELECT consumption_answers, consumption_refund_preference, consumption_sample_content
            FROM ledger.apps WHERE bundle_id = \(bundleID)
            """, logger: logger)
        for try await (answering, preference, sample) in rows.decode((Bool, String?, Bool).self) {
            return ConsumptionAnswerSettings(answering: answering, refundPreference: preference, sampleContentProvided: sample)
        }
        throw AccessError.unknownApp(bundleID)
    }

    /// Sets how the app answers Apple's refund questions, through the owner's function.
    public func setConsumptionAnswerSettings(_ settings: ConsumptionAnswerSettings, of bundleID: String) async throws {
        if let preference = settings.refundPreference, !ConsumptionAnswerSettings.refundPreferences.contains(preference) {
            throw AccessError.invalidInput("the refund preference must be one of \(ConsumptionAnswerSettings.refundPreferences.joined(separator: ", ")), not \(preference)")
        }
        let rows = try await client.query("""
            SELECT ledger.app_set_consumption_answers(\(bundleID), \(settings.answering), \(settings.refundPreference), \(settings.sampleContentProvided))
            """, logger: logger)
        for try await set in rows.decode(Bool.self) where set { return }
        throw AccessError.unknownApp(bundleID)
    }

    /// What a sealed Server API key is bound to: never opens as a shared secret, nor for another app.
    static func serverAPIKeyLabel(_ bundleID: String) -> String { "\(bundleID) server API key" }

    /// Whether the app is registered (`ledger apps add`).
    public func isRegistered(_ bundleID: String) async throws -> Bool {
        let rows = try await client.query("SELECT 1 FROM ledger.apps WHERE bundle_id = \(bundleID)", logger: logger)
        for try await _ in rows { return true }
        return false
    }

    public func bundleIDs() async throws -> [String] {
        let rows = try await client.query("SELECT bundle_id FROM ledger.apps ORDER BY bundle_id", logger: logger)
        var ids: [String] = []
        for try await id in rows.decode(String.self) { ids.append(id) }
        return ids
    }

    public func apps() async throws -> [RegisteredApp] {
        let rows = try await client.query("""
            SELECT a.bundle_id, a.shared_secret IS NOT NULL OR a.shared_secret_sealed IS NOT NULL,
                   a.shared_secret_sealed IS NOT NULL, a.created_at,
                   (SELECT count(*) FROM ledger.api_keys k WHERE k.app = a.bundle_id AND k.revoked_at IS NULL)
            FROM ledger.apps a ORDER BY a.bundle_id
            """, logger: logger)
        var apps: [RegisteredApp] = []
        for try await (bundleID, hasSecret, sealed, createdAt, keys) in rows.decode((String, Bool, Bool, Date, Int64).self) {
            apps.append(RegisteredApp(bundleId: bundleID, hasSharedSecret: hasSecret, sharedSecretSealed: sealed,
                                      createdAt: createdAt, activeKeys: Int(keys)))
        }
        return apps
    }

    /// The app's shared secret, nil when it has none; throws when the app is not registered, and
    /// `SecretError` when its sealed secret cannot be opened (never a wrong secret in its place).
    public func sharedSecret(of bundleID: String) async throws -> String? {
        // Kept while changes of apps are listened for, forgotten at every one (`AcceptedKeys`).
        if let kept = acceptedKeys?.secret(of: bundleID) { return kept }
        let ticket = acceptedKeys?.ticket()
        let rows = try await client.query(
            "SELECT shared_secret, shared_secret_sealed, shared_secret_key_id FROM ledger.apps WHERE bundle_id = \(bundleID)",
            logger: logger
        )
        for try await (plaintext, sealed, keyID) in rows.decode((String?, Data?, String?).self) {
            let secret: String?
            if let sealed, let keyID {
                guard let secrets else { throw SecretError.noKey("the shared secret of \(bundleID) is sealed with key \(keyID)") }
                secret = try secrets.open(sealed, sealedWith: keyID, app: bundleID)
            } else {
                secret = plaintext
            }
            if let ticket { acceptedKeys?.keep(secret: secret, of: bundleID, ticket: ticket) }
            return secret
        }
        throw AccessError.unknownApp(bundleID)
    }

    /// Seals every shared secret still stored in plaintext, each in the same statement that clears
    /// its plaintext; returns how many. Nothing happens without a key.
    @discardableResult
    public func sealPlaintextSecrets() async throws -> Int {
        guard let secrets else { return 0 }
        let rows = try await client.query(
            "SELECT bundle_id, shared_secret FROM ledger.apps WHERE shared_secret IS NOT NULL ORDER BY bundle_id", logger: logger
        )
        var sealedCount = 0
        for (bundleID, secret) in try await rows.collect().map({ try $0.decode((String, String).self) }) {
            let sealed = try secrets.seal(secret, app: bundleID)
            // Proved to open to the same secret before the plaintext goes.
            guard try secrets.open(sealed, sealedWith: secrets.keyID, app: bundleID) == secret else {
                throw SecretError.unreadableSecret(app: bundleID, "sealing it did not give it back")
            }
            // Only the plaintext read above is replaced: a secret set meanwhile is left alone.
            let updated = try await client.query(
                "SELECT ledger.app_seal_secret(\(bundleID), \(secret), \(sealed), \(secrets.keyID))", logger: logger
            ).collect()
            if try updated.first?.decode(Bool.self) == true {
                sealedCount += 1
                logger.info("shared secret sealed", metadata: ["ledger.app": "\(bundleID)", "ledger.secret_key_id": "\(secrets.keyID)"])
            }
        }
        return sealedCount
    }

    /// The apps whose stored secret does not open with the configured key (or with none), each
    /// with the reason: for `ledger serve` to say at start, rather than at the first receipt.
    public func unreadableSecrets() async throws -> [(app: String, error: SecretError)] {
        let rows = try await client.query(
            "SELECT bundle_id FROM ledger.apps WHERE shared_secret_sealed IS NOT NULL ORDER BY bundle_id", logger: logger
        )
        var unreadable: [(app: String, error: SecretError)] = []
        for bundleID in try await rows.collect().map({ try $0.decode(String.self) }) {
            do {
                _ = try await sharedSecret(of: bundleID)
            } catch let error as SecretError {
                unreadable.append((bundleID, error))
            }
        }
        return unreadable
    }

    // MARK: Keys

    /// Creates a key for a registered app. The returned token is the only copy of the secret.
    public func createKey(app bundleID: String, scopes: Set<APIScope>, name: String? = nil) async throws -> IssuedAPIKey {
        guard !scopes.isEmpty else {
            throw AccessError.invalidInput("a key needs at least one scope of: \(APIScope.allNames)")
        }
        if let name, name.utf8.count > 200 { throw AccessError.invalidInput("a key name has at most 200 characters") }
        let registered = try await client.query("SELECT 1 FROM ledger.apps WHERE bundle_id = \(bundleID)", logger: logger).collect()
        guard !registered.isEmpty else { throw AccessError.unknownApp(bundleID) }
        let keyID = Self.randomToken(bytes: 8, hex: true)
        let secret = Self.randomToken(bytes: 32, hex: false)
        let hash = Data(SHA256.hash(data: Data(secret.utf8)))
        let sortedScopes = scopes.sorted().map(\.rawValue)
        // Through the owner's function (migration 0018), which records the key's creation in the log.
        let rows = try await client.query(
            "SELECT ledger.key_create(\(keyID), \(bundleID), \(hash), \(sortedScopes), \(name))", thenConfirmCommit: true, logger: logger
        )
        var createdAt = Date()
        for try await value in rows.decode(Date.self) { createdAt = value }
        logger.info("api key created", metadata: ["ledger.app": "\(bundleID)", "ledger.key_id": "\(keyID)", "ledger.scopes": "\(sortedScopes)"])
        return IssuedAPIKey(
            key: APIKey(keyId: keyID, app: bundleID, scopes: scopes, name: name, createdAt: createdAt, revokedAt: nil),
            token: "lk_\(keyID)_\(secret)"
        )
    }

    /// Every key, or one app's, newest first.
    public func keys(app bundleID: String? = nil) async throws -> [APIKey] {
        let rows = try await client.query("""
            SELECT key_id, app, array_to_string(scopes, ','), name, created_at, revoked_at FROM ledger.api_keys
            WHERE \(bundleID)::text IS NULL OR app = \(bundleID)::text ORDER BY created_at DESC, key_id
            """, logger: logger)
        var keys: [APIKey] = []
        for try await (keyID, app, scopes, name, createdAt, revokedAt) in rows.decode((String, String, String, String?, Date, Date?).self) {
            keys.append(APIKey(keyId: keyID, app: app, scopes: Set(scopes.split(separator: ",").compactMap { APIScope(rawValue: String($0)) }),
                               name: name, createdAt: createdAt, revokedAt: revokedAt))
        }
        return keys
    }

    /// Revokes a key at once; revoking it again changes nothing.
    @discardableResult
    public func revokeKey(_ keyID: String) async throws -> APIKey {
        let id = keyID.hasPrefix("lk_") ? String(keyID.dropFirst(3).prefix { $0 != "_" }) : keyID
        // Through the owner's function (migration 0018): final, and recorded in the log the first time.
        let rows = try await client.query(
            "SELECT app, scopes, name, created_at, revoked_at FROM ledger.key_revoke(\(id))", thenConfirmCommit: true, logger: logger
        )  // "revoked" is said only once it is
        var revoked: APIKey?
        for try await (app, scopes, name, createdAt, revokedAt) in rows.decode((String, String, String?, Date, Date?).self) {
            revoked = APIKey(keyId: id, app: app, scopes: Set(scopes.split(separator: ",").compactMap { APIScope(rawValue: String($0)) }),
                             name: name, createdAt: createdAt, revokedAt: revokedAt)
        }
        guard let key = revoked else { throw AccessError.unknownKey(keyID) }
        // Other servers learn of it from the announcement (migration 0012); this one at once.
        acceptedKeys?.revoked(generation: 0)
        logger.info("api key revoked", metadata: ["ledger.app": "\(key.app)", "ledger.key_id": "\(id)"])
        return key
    }

    /// The key a bearer token stands for, nil when it is malformed, unknown or revoked.
    ///
    /// What an unauthenticated caller can cost is bounded: a token not of the form
    /// `lk_<16 hex>_<secret>` is refused without a query, and a well-formed one refused lately
    /// (`RefusedTokenCache`) is refused again without one. A key accepted lately is accepted again
    /// without one while revocations are listened for (`AcceptedKeys`).
    public func authenticate(_ token: String) async throws -> APIKey? {
        guard token.utf8.count < 200 else { return nil }
        let parts = token.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "lk", parts[1].utf8.count == 16,
              parts[1].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }),
              !parts[2].isEmpty
        else { return nil }
        let tokenHash = Data(SHA256.hash(data: Data(token.utf8)))
        if refusedTokens.contains(tokenHash) { return nil }
        if let key = acceptedKeys?.key(for: tokenHash) { return key }
        let ticket = acceptedKeys?.ticket()
        let keyID = String(parts[1])
        let rows = try await client.query("""
            SELECT app, array_to_string(scopes, ','), name, created_at, secret_hash FROM ledger.api_keys
            WHERE key_id = \(keyID) AND revoked_at IS NULL
            """, logger: logger)
        for try await (app, scopes, name, createdAt, stored) in rows.decode((String, String, String?, Date, Data).self) {
            let presented = Data(SHA256.hash(data: Data(parts[2].utf8)))
            // Compare every byte whatever the first difference, so timing says nothing about the secret.
            guard presented.count == stored.count, zip(presented, stored).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else {
                refusedTokens.insert(tokenHash)
                return nil
            }
            let key = APIKey(keyId: keyID, app: app, scopes: Set(scopes.split(separator: ",").compactMap { APIScope(rawValue: String($0)) }),
                             name: name, createdAt: createdAt, revokedAt: nil)
            if let ticket { acceptedKeys?.keep(key, for: tokenHash, ticket: ticket) }
            return key
        }
        refusedTokens.insert(tokenHash)
        return nil
    }

    // MARK: Helpers

    /// A bundle id as the App Store has them: letters, digits, '.', '-' and '_', up to 255 characters.
    public static func validateBundleID(_ bundleID: String) throws(AccessError) {
        guard !bundleID.isEmpty, bundleID.utf8.count <= 255,
              bundleID.unicodeScalars.allSatisfy({ $0.isASCII && (CharacterSet.alphanumerics.contains($0) || ".-_".unicodeScalars.contains($0)) })
        else {
            throw .invalidInput("bundle id '\(bundleID)' must be 1 to 255 letters, digits, '.', '-' or '_' (such as com.example.app)")
        }
    }

    private static func randomToken(bytes count: Int, hex: Bool) -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<count).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        if hex { return bytes.map { String(format: "%02x", $0) }.joined() }
        return Base64URL.encode(bytes)
    }
}
