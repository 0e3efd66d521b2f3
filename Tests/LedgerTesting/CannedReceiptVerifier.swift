import AppStore
import Foundation
import LedgerApplication
import LedgerDomain
import Logging

/// A `verifyReceipt` that answers from a table: each receipt's JSON answer as Apple writes it,
/// read by the ledger's own parser (`ReceiptResponseParser`). A receipt it does not know is
/// refused with 21003, as Apple refuses a receipt it cannot authenticate.
public struct CannedReceiptVerifier: ReceiptVerifier {
    let answers: [String: (environment: StoreEnvironment, json: Data)]

    public init(answers: [String: (environment: StoreEnvironment, json: Data)]) {
        self.answers = answers
    }

    public func verify(_ request: ReceiptVerificationRequest, logger: Logger) async throws -> VerifiedReceipt {
        guard let answer = answers[request.receiptData] else {
            throw ReceiptVerificationError.invalidReceipt(ReceiptStatus(code: 21003), environment: .production)
        }
        return try ReceiptResponseParser(receiptSHA256: ContentHash.sha256Hex(request.receiptData), answeredBy: answer.environment).read(answer.json)
    }

    /// Apple's answer for an app receipt of `bundleId` listing `transactions` (`receipt.in_app`).
    public static func appReceipt(bundleId: String, _ transactions: [TestTransaction]) throws -> Data {
        try JSONSerialization.data(withJSONObject: [
            "status": 0, "environment": "Production",
            "receipt": ["bundle_id": bundleId, "request_date_ms": String(TestTransaction.defaultDate.milliseconds), "in_app": transactions.map(\.fields)],
        ] as [String: Any])
    }
}
