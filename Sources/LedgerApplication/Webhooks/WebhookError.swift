/// Refusals of webhook administration and delivery, with what to do about them. No message ever
/// holds an endpoint's secret.
public struct WebhookError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// The URL is not one the ledger delivers to (scheme, host, length).
        case invalidURL = "invalid_webhook_url"
        /// A type, position, change id or limit that cannot be.
        case invalidInput = "invalid_input"
        /// No such endpoint (or not the caller's app's, or removed).
        case unknownEndpoint = "unknown_webhook_endpoint"
        /// The endpoint never queued this change.
        case unknownChange = "unknown_change"
    }

    public let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func invalidURL(_ url: String, _ problem: String) -> Self {
        .init(.invalidURL, "the webhook URL '\(url.prefix(200))' is refused: \(problem)")
    }

    public static func invalidInput(_ message: String) -> Self {
        .init(.invalidInput, message)
    }

    public static func unknownEndpoint(_ id: String, app: String?) -> Self {
        .init(.unknownEndpoint, "there is no webhook endpoint \(id)\(app.map { " of \($0)" } ?? ""); `ledger webhooks list --app APP` shows them")
    }

    public static func unknownChange(_ changeID: String, endpoint: String) -> Self {
        .init(.unknownChange, "endpoint \(endpoint) has no delivery of \(changeID): it was never queued for it (a change before the endpoint's start, or of a type it does not take); `--after POSITION` queues earlier changes again")
    }

    public var description: String { message }
}
