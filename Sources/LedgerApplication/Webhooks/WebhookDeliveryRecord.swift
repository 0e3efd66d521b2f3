import Foundation

/// One change queued for one endpoint, with every attempt to deliver it.
public struct WebhookDeliveryRecord: Sendable, Hashable, Codable {
    public enum Status: String, Sendable, Hashable, Codable {
        /// To be sent (again) at `nextAttemptAt`.
        case pending
        /// The endpoint answered 2xx.
        case delivered
        /// Retries ended without a 2xx; sent again only when resent.
        case parked
    }

    public let endpointId: String
    /// `chg_<position>_<seq>`: the `webhook-id` header of every attempt.
    public let changeId: String
    public let position: Int64
    public let seq: Int
    public let userId: String
    public let type: String
    public let status: Status
    /// Attempts made so far.
    public let attempts: Int
    /// When a pending delivery is next tried; nil once delivered or parked.
    public let nextAttemptAt: Date?
    public let queuedAt: Date
    public let deliveredAt: Date?
    /// Every attempt, oldest first.
    public let history: [WebhookAttempt]

    public init(
        endpointId: String, position: Int64, seq: Int, userId: String, type: String, status: Status, attempts: Int,
        nextAttemptAt: Date?, queuedAt: Date, deliveredAt: Date?, history: [WebhookAttempt]
    ) {
        self.endpointId = endpointId
        self.changeId = WebhookChangeID(position: position, seq: seq).description
        self.position = position
        self.seq = seq
        self.userId = userId
        self.type = type
        self.status = status
        self.attempts = attempts
        self.nextAttemptAt = nextAttemptAt
        self.queuedAt = queuedAt
        self.deliveredAt = deliveredAt
        self.history = history
    }
}
