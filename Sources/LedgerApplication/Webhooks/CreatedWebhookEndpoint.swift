/// A new endpoint and its secret: the only time the secret is shown.
public struct CreatedWebhookEndpoint: Sendable {
    public let endpoint: WebhookEndpoint
    public let secret: WebhookSecret

    public init(endpoint: WebhookEndpoint, secret: WebhookSecret) {
        self.endpoint = endpoint
        self.secret = secret
    }
}
