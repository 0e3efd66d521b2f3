import Logging

/// Asks the App Store whether a receipt is genuine and what it contains.
///
/// The ledger records nothing a device says until a verifier has confirmed it. Implementations throw
/// `ReceiptVerificationError`: `invalidReceipt` (the App Store refused it: answer 422),
/// `unavailable` (try again later: answer 503) or `malformedResponse`.
public protocol ReceiptVerifier: Sendable {
    func verify(_ request: ReceiptVerificationRequest, logger: Logger) async throws -> VerifiedReceipt
}
