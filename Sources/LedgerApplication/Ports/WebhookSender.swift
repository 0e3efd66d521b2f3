/// Sends one signed POST to an endpoint. Never throws: whatever went wrong is the answer's `error`.
public protocol WebhookSender: Sendable {
    func send(_ request: WebhookRequest) async -> WebhookAnswer
}
