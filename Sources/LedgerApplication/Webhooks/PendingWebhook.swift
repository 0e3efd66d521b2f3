/// A delivery due now, as the worker sends it: the change's body exactly as the feed has it.
public struct PendingWebhook: Sendable, Hashable {
    public let endpointId: String
    public let change: WebhookChangeID
    public let userId: String
    public let body: String
    /// Attempts made so far (all rounds).
    public let attempts: Int
    /// Attempts made before the current round of retries began (0, or as many as when it was last resent).
    public let roundStart: Int

    public init(endpointId: String, change: WebhookChangeID, userId: String, body: String, attempts: Int, roundStart: Int) {
        self.endpointId = endpointId
        self.change = change
        self.userId = userId
        self.body = body
        self.attempts = attempts
        self.roundStart = roundStart
    }

    /// The number of the attempt about to be made in this round (1 for the first).
    public var attemptInRound: Int { attempts - roundStart + 1 }
}
