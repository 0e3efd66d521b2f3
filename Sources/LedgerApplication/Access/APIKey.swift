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
