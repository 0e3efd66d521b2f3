/// The `status` of a `verifyReceipt` answer, and what the ledger does about it.
///
/// Meanings follow Apple's receipt validation guide (status codes 21000–21010 and 21100–21199).
public struct ReceiptStatus: Hashable, Sendable, CustomStringConvertible {
    /// What a caller should do with a status.
    public enum Handling: Hashable, Sendable {
        /// The receipt is valid: record its transactions.
        case valid
        /// Ask the other environment (21007: sandbox receipt sent to production; 21008: the reverse).
        case retryInSandbox
        case retryInProduction
        /// The App Store could not answer now: retry with backoff, then report it unavailable.
        case retryLater
        /// Valid but expired (old-style auto-renewable receipts): the decoded receipt still counts.
        case validButExpired
        /// The receipt is refused: nothing is recorded.
        case invalid
    }

    public let code: Int

    public init(code: Int) {
        self.code = code
    }

    /// The answer's retry flag: `is_retryable` as Apple spells it now, `is-retryable` in older answers.
    public static func isRetryableFlag(in answer: LenientJSON) -> Bool {
        answer["is_retryable"].bool ?? answer["is-retryable"].bool ?? false
    }

    /// How to treat this status; `isRetryable` is the answer's retry flag (`isRetryableFlag(in:)`).
    public func handling(isRetryable: Bool = false) -> Handling {
        switch code {
        case 0: .valid
        case 21005, 21009: .retryLater
        case 21006: .validButExpired
        case 21007: .retryInSandbox
        case 21008: .retryInProduction
        case 21100...21199: isRetryable ? .retryLater : .invalid
        default: .invalid
        }
    }

    /// A plain explanation, for error messages and logs.
    public var meaning: String {
        switch code {
        case 0: "the receipt is valid"
        case 21000: "the App Store could not read the JSON request"
        case 21002: "the receipt-data was malformed or missing"
        case 21003: "the receipt could not be authenticated (tampered, or not issued by the App Store)"
        case 21004: "the shared secret does not match the one on file for the app"
        case 21005: "the receipt server is not available right now"
        case 21006: "the receipt is valid but the subscription has expired"
        case 21007: "the receipt is from the sandbox but was sent to production"
        case 21008: "the receipt is from production but was sent to the sandbox"
        case 21009: "the App Store had an internal data access error"
        case 21010: "the receipt could not be authorized: treat it as if no purchase was made"
        case 21100...21199: "the App Store had an internal data access error"
        default: "the App Store answered with an undocumented status"
        }
    }

    public var description: String { "\(code) (\(meaning))" }
}
