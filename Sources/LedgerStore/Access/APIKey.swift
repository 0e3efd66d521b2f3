import Foundation

/// An API key as stored: which app it belongs to and what it may do. The secret is never kept.
public struct APIKey: Sendable, Hashable {
    /// The public part of the key, shown in lists and logs: `lk_<keyId>_<secret>`.
    public let keyId: String
    public let app: String
    public let scopes: Set<APIScope>
    public let name: String?
    public let createdAt: Date
    public let revokedAt: Date?

    public init(keyId: String, app: String, scopes: Set<APIScope>, name: String?, createdAt: Date, revokedAt: Date?) {
        self.keyId = keyId
        self.app = app
        self.scopes = scopes
        self.name = name
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }

    public var isRevoked: Bool { revokedAt != nil }
}

/// A key just created: the only moment its full text exists.
public struct IssuedAPIKey: Sendable {
    public let key: APIKey
    /// `lk_<keyId>_<secret>`: give it to the app's server; it cannot be shown again.
    public let token: String
}

/// An app the ledger records purchases for.
public struct RegisteredApp: Sendable, Hashable {
    public let bundleId: String
    public let hasSharedSecret: Bool
    /// Whether the shared secret is stored sealed (false for one stored before sealing, until sealed).
    public let sharedSecretSealed: Bool
    public let createdAt: Date
    public let activeKeys: Int
}
