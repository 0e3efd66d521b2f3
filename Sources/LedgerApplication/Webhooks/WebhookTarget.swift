/// An active endpoint as the worker needs it: where to POST and the opened secret to sign with.
public struct WebhookTarget: Sendable {
    public let endpointId: String
    public let app: String
    public let url: String
    public let secret: WebhookSecret

    public init(endpointId: String, app: String, url: String, secret: WebhookSecret) {
        self.endpointId = endpointId
        self.app = app
        self.url = url
        self.secret = secret
    }
}
