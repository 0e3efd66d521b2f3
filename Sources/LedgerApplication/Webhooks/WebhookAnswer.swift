/// What an endpoint answered to one POST, or why it did not.
public struct WebhookAnswer: Sendable, Hashable {
    /// Nil when no answer came (refused connection, timeout, TLS failure).
    public let statusCode: Int?
    public let error: String?
    /// The first bytes of the answer's body, as text.
    public let response: String?
    public let duration: Duration

    public init(statusCode: Int?, error: String?, response: String?, duration: Duration) {
        self.statusCode = statusCode
        self.error = error
        self.response = response
        self.duration = duration
    }

    /// Only a 2xx delivers: a redirect is not followed, and counts as a failed attempt.
    public var delivered: Bool { statusCode.map { (200..<300).contains($0) } ?? false }
}
