import Foundation

/// An app the ledger records purchases for.
public struct RegisteredApp: Sendable, Hashable {
    public let bundleId: String
    public let hasSharedSecret: Bool
    /// Whether the shared secret is stored sealed (false for one stored before sealing, until sealed).
    public let sharedSecretSealed: Bool
    public let createdAt: Date
    public let activeKeys: Int

    public init(bundleId: String, hasSharedSecret: Bool, sharedSecretSealed: Bool, createdAt: Date, activeKeys: Int) {
        self.bundleId = bundleId
        self.hasSharedSecret = hasSharedSecret
        self.sharedSecretSealed = sharedSecretSealed
        self.createdAt = createdAt
        self.activeKeys = activeKeys
    }
}
