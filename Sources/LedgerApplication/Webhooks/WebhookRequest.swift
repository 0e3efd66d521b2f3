/// One signed POST, ready to send.
public struct WebhookRequest: Sendable {
    public let url: String
    public let headers: [(name: String, value: String)]
    public let body: String

    public init(url: String, headers: [(name: String, value: String)], body: String) {
        self.url = url
        self.headers = headers
        self.body = body
    }
}
