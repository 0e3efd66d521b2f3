import Foundation

/// The first answer to each client command sent under an `Idempotency-Key`, per app.
///
/// The command's own append is its claim (the key is its first event's deduplication key); what
/// is kept here makes a retry's answer byte-identical to the first and keeps a refusal a refusal.
public protocol IdempotencyRecords: Sendable {
    /// Claims the key for a request with this body hash, or says what was kept under it.
    func claim(app: String, key: String, requestHash: Data) async throws -> IdempotencyClaim
    /// Keeps the answer of the claimed key's command.
    func complete(app: String, key: String, status: Int, body: Data) async throws
    /// Forgets the claim (the request failed in a way a retry may fix, such as a 503).
    func release(app: String, key: String) async throws
}

/// What claiming an idempotency key found.
public enum IdempotencyClaim: Sendable, Hashable {
    /// No answer is kept for the key (it is new, or its first request is running or died):
    /// run the command, whose append is the claim, then `complete` or `release`.
    case claimed
    /// The key was used with another request.
    case mismatch
    /// The first answer, to send again.
    case replay(status: Int, body: Data)
}
