import Foundation
import LedgerDomain

/// A non-renewing subscription period the ledger restored to one of the user's devices: the App
/// Store does not restore these, so each restore is the ledger's own delivery, and finance counts
/// them next to the periods sold.
public struct AuditRestore: Sendable, Hashable, Codable {
    /// Log position of the restore.
    public let position: Int64
    /// When the ledger recorded the restore (nil only for events recorded before the log kept the time).
    public let restoredAt: Date?
    /// The environment of the restored purchase; nil when the audit trail has no purchase row for it.
    public let environment: StoreEnvironment?
    public let userId: String
    /// The device the period was restored to.
    public let deviceId: String
    /// The purchase whose period was restored.
    public let transactionId: String
    public let productId: String?

    public init(position: Int64, restoredAt: Date?, environment: StoreEnvironment?, userId: String, deviceId: String,
                transactionId: String, productId: String?) {
        self.position = position
        self.restoredAt = restoredAt
        self.environment = environment
        self.userId = userId
        self.deviceId = deviceId
        self.transactionId = transactionId
        self.productId = productId
    }

    enum CodingKeys: String, CodingKey { case position, restoredAt, environment, userId, deviceId, transactionId, productId }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let text = try container.decodeIfPresent(String.self, forKey: .restoredAt)
        let restoredAt = text.flatMap(LedgerJSON.parseTimestamp)
        if let text, restoredAt == nil {
            throw DecodingError.dataCorruptedError(forKey: .restoredAt, in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
        }
        self.init(
            position: try container.decode(Int64.self, forKey: .position), restoredAt: restoredAt,
            environment: try container.decodeIfPresent(StoreEnvironment.self, forKey: .environment),
            userId: try container.decode(String.self, forKey: .userId), deviceId: try container.decode(String.self, forKey: .deviceId),
            transactionId: try container.decode(String.self, forKey: .transactionId),
            productId: try container.decodeIfPresent(String.self, forKey: .productId)
        )
    }

    /// Every key present (null when absent), times as ISO 8601 UTC text.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(position, forKey: .position)
        try container.encode(restoredAt.map(LedgerJSON.formatTimestamp), forKey: .restoredAt)
        try container.encode(environment, forKey: .environment)
        try container.encode(userId, forKey: .userId)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(productId, forKey: .productId)
    }
}
