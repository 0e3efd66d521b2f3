import Foundation

/// One POST of a change to an endpoint, and what came of it.
public struct WebhookAttempt: Sendable, Hashable, Codable {
    /// 1 for the first; numbers go on across resends.
    public let attempt: Int
    public let at: Date
    public let durationMs: Int
    /// The endpoint's HTTP status; nil when there was no answer (see `error`).
    public let statusCode: Int?
    /// Why there was no answer, or why the answer did not count (a redirect).
    public let error: String?
    /// The first bytes of the answer's body.
    public let response: String?

    public init(attempt: Int, at: Date, durationMs: Int, statusCode: Int?, error: String?, response: String?) {
        self.attempt = attempt
        self.at = at
        self.durationMs = durationMs
        self.statusCode = statusCode
        self.error = error
        self.response = response
    }

    /// Whether the endpoint took the change (a 2xx).
    public var succeeded: Bool { statusCode.map { (200..<300).contains($0) } ?? false }
}
