import Crypto
import Foundation
import Logging
import PostgresNIO

/// Apps and their API keys. Keys are `lk_<id>_<secret>`; only the SHA-256 of the secret is stored,
/// so a leaked database does not leak working keys.
public struct AppRegistry: Sendable {

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Apps

    /// Registers an app, or replaces its shared secret when it is registered. Returns whether it is new.
    @discardableResult
    public func addApp(_ bundleID: String, sharedSecret: String?) async throws -> Bool {
        try Self.validateBundleID(bundleID)
        if let sharedSecret, sharedSecret.isEmpty || sharedSecret.utf8.count > 255 {
            throw AccessError.invalidInput("the shared secret must have 1 to 255 characters")
        }
        let rows = try await client.query("""
            INSERT INTO ledger.apps (bundle_id, shared_secret) VALUES (\(bundleID), \(sharedSecret))
            ON CONFLICT (bundle_id) DO UPDATE SET shared_secret = coalesce(EXCLUDED.shared_secret, ledger.apps.shared_secret)
            RETURNING (xmax = 0)
            """, logger: logger)
        for try await inserted in rows.decode(Bool.self) { return inserted }
        return false
    }

    public func apps() async throws -> [RegisteredApp] {
        let rows = try await client.query("""
            SELECT a.bundle_id, a.shared_secret IS NOT NULL, a.created_at,
                   (SELECT count(*) FROM ledger.api_keys k WHERE k.app = a.bundle_id AND k.revoked_at IS NULL)
            FROM ledger.apps a ORDER BY a.bundle_id
            """, logger: logger)
        var apps: [RegisteredApp] = []
        for try await (bundleID, hasSecret, createdAt, keys) in rows.decode((String, Bool, Date, Int64).self) {
            apps.append(RegisteredApp(bundleId: bundleID, hasSharedSecret: hasSecret, createdAt: createdAt, activeKeys: Int(keys)))
        }
        return apps
    }

    /// The app's shared secret, nil when it has none; throws when the app is not registered.
    public func sharedSecret(of bundleID: String) async throws -> String? {
        let rows = try await client.query("SELECT shared_secret FROM ledger.apps WHERE bundle_id = \(bundleID)", logger: logger)
        for try await secret in rows.decode(String?.self) { return secret }
        throw AccessError.unknownApp(bundleID)
    }

    // MARK: Keys

    /// Creates a key for a registered app. The returned token is the only copy of the secret.
    public func createKey(app bundleID: String, scopes: Set<APIScope>, name: String? = nil) async throws -> IssuedAPIKey {
        guard !scopes.isEmpty else {
            throw AccessError.invalidInput("a key needs at least one scope of: \(APIScope.allNames)")
        }
        if let name, name.utf8.count > 200 { throw AccessError.invalidInput("a key name has at most 200 characters") }
        _ = try await sharedSecret(of: bundleID)
        let keyID = Self.randomToken(bytes: 8, hex: true)
        let secret = Self.randomToken(bytes: 32, hex: false)
        let hash = Data(SHA256.hash(data: Data(secret.utf8)))
        let sortedScopes = scopes.sorted().map(\.rawValue)
        let rows = try await client.query("""
            INSERT INTO ledger.api_keys (key_id, app, secret_hash, scopes, name)
            VALUES (\(keyID), \(bundleID), \(hash), \(sortedScopes), \(name))
            RETURNING created_at
            """, logger: logger)
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
        let rows = try await client.query("""
            UPDATE ledger.api_keys SET revoked_at = coalesce(revoked_at, now()) WHERE key_id = \(id)
            RETURNING app, array_to_string(scopes, ','), name, created_at, revoked_at
            """, logger: logger)
        var revoked: APIKey?
        for try await (app, scopes, name, createdAt, revokedAt) in rows.decode((String, String, String?, Date, Date?).self) {
            revoked = APIKey(keyId: id, app: app, scopes: Set(scopes.split(separator: ",").compactMap { APIScope(rawValue: String($0)) }),
                             name: name, createdAt: createdAt, revokedAt: revokedAt)
        }
        guard let key = revoked else { throw AccessError.unknownKey(keyID) }
        logger.info("api key revoked", metadata: ["ledger.app": "\(key.app)", "ledger.key_id": "\(id)"])
        return key
    }

    /// The key a bearer token stands for, nil when it is malformed, unknown or revoked.
    public func authenticate(_ token: String) async throws -> APIKey? {
        let parts = token.split(separator: "_", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "lk", parts[1].count == 16, !parts[2].isEmpty, token.utf8.count < 200 else { return nil }
        let keyID = String(parts[1])
        let rows = try await client.query("""
            SELECT app, array_to_string(scopes, ','), name, created_at, secret_hash FROM ledger.api_keys
            WHERE key_id = \(keyID) AND revoked_at IS NULL
            """, logger: logger)
        for try await (app, scopes, name, createdAt, stored) in rows.decode((String, String, String?, Date, Data).self) {
            let presented = Data(SHA256.hash(data: Data(parts[2].utf8)))
            // Compare every byte whatever the first difference, so timing says nothing about the secret.
            guard presented.count == stored.count, zip(presented, stored).reduce(0, { $0 | ($1.0 ^ $1.1) }) == 0 else { return nil }
            return APIKey(keyId: keyID, app: app, scopes: Set(scopes.split(separator: ",").compactMap { APIScope(rawValue: String($0)) }),
                          name: name, createdAt: createdAt, revokedAt: nil)
        }
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
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
