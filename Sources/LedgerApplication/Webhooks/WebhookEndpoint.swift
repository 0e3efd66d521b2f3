import Foundation

/// Where an app's changes are POSTed, as an operator registered it. Its secret is not here: it is
/// shown once, when the endpoint is added (`CreatedWebhookEndpoint`), and kept sealed.
public struct WebhookEndpoint: Sendable, Hashable, Codable {
    /// `wh_` and 16 hex digits.
    public let id: String
    public let app: String
    public let url: String
    /// The change types sent; nil: all of them.
    public let types: [String]?
    /// Every change up to this log position has been queued for the endpoint.
    public let position: Int64
    public let createdAt: Date
    /// When it was removed (deliveries stopped); nil while it is active.
    public let removedAt: Date?

    public init(id: String, app: String, url: String, types: [String]?, position: Int64, createdAt: Date, removedAt: Date?) {
        self.id = id
        self.app = app
        self.url = url
        self.types = types
        self.position = position
        self.createdAt = createdAt
        self.removedAt = removedAt
    }
}
