/// What becomes of a delivery after an attempt.
public enum WebhookAttemptOutcome: Sendable, Hashable {
    case delivered
    /// Tried again after this long.
    case retry(after: Duration)
    /// Retries ended: sent again only when an operator resends it.
    case parked
}
