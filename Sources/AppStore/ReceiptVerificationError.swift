import LedgerDomain

/// Why a receipt could not be verified, with a message an operator or app developer can act on.
///
/// Branch on `code`: `.invalidReceipt` means the App Store refused the receipt (the HTTP layer answers
/// 422 and records nothing), `.unavailable` that it could not answer after the retries (503; the
/// device should send the receipt again later), `.malformedResponse` that it answered something this
/// client cannot read (502).
public struct ReceiptVerificationError: Error, Sendable, CustomStringConvertible {
    /// The kind of failure; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case invalidReceipt
            case unavailable
            case malformedResponse
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// The App Store answered a status that refuses the receipt.
        public static let invalidReceipt = Code(.invalidReceipt)
        /// The App Store did not answer usefully in time (21005, retryable 21100–21199, timeouts, connection errors).
        public static let unavailable = Code(.unavailable)
        /// The answer was not a `verifyReceipt` answer this client can read.
        public static let malformedResponse = Code(.malformedResponse)

        public var description: String {
            switch base {
            case .invalidReceipt: "invalid_receipt"
            case .unavailable: "app_store_unavailable"
            case .malformedResponse: "malformed_app_store_response"
            }
        }
    }

    public let code: Code
    /// The App Store's status, when it gave one.
    public let status: ReceiptStatus?
    /// One sentence for the caller: what happened and what to do.
    public let message: String

    private init(code: Code, status: ReceiptStatus?, message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    /// Whether sending the same receipt again later may succeed.
    public var isRetryable: Bool { code == .unavailable }

    public var description: String { "\(code): \(message)" }

    /// The App Store refused the receipt with `status`.
    public static func invalidReceipt(_ status: ReceiptStatus, environment: StoreEnvironment) -> Self {
        let advice: String = switch status.code {
        case 21004: "check the app's shared secret in the ledger's configuration"
        case 21000, 21002: "send the receipt as the device's base64 receipt data, unchanged"
        case 21007, 21008: "check the production and sandbox verifyReceipt URLs in the ledger's configuration"
        default: "nothing was recorded; do not deliver content for this receipt"
        }
        return .init(
            code: .invalidReceipt,
            status: status,
            message: "the \(environment) App Store refused the receipt with status \(status.code): \(status.meaning); \(advice)"
        )
    }

    /// The App Store could not be reached or asked to be retried, and the retries ran out.
    public static func unavailable(_ reason: String, status: ReceiptStatus? = nil) -> Self {
        .init(
            code: .unavailable,
            status: status,
            message: "App Store unavailable: \(reason); nothing was recorded, send the receipt again later"
        )
    }

    /// The App Store's answer could not be read.
    public static func malformedResponse(_ what: String) -> Self {
        .init(
            code: .malformedResponse,
            status: nil,
            message: "the App Store's answer could not be read: \(what); nothing was recorded, send the receipt again later"
        )
    }
}
