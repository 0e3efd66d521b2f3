import Foundation
import LedgerApplication
import LedgerDomain

/// A receipt the App Store confirmed, reduced to what the ledger records.
public struct VerifiedReceipt: Hashable, Sendable {
    /// Which kind of receipt the device sent.
    public enum Style: String, Hashable, Sendable {
        /// An iOS 7 style app receipt: `receipt.in_app[]`, `latest_receipt_info[]`.
        case appReceipt
        /// An iOS 6 style transaction receipt: one transaction at the top of `receipt`.
        case transactionReceipt
    }

    /// The environment that verified the receipt; sandbox money is never revenue.
    public let environment: StoreEnvironment
    public let bundleId: String
    /// Lower-case hex SHA-256 of the `receipt-data` exactly as received; the ledger stores it as the source.
    public let receiptSHA256: String
    /// 0, or 21006 for an old-style subscription receipt that is valid but expired (its content still counts).
    public let status: ReceiptStatus
    public let style: Style
    /// Every transaction once: the union of the receipt's and `latest_receipt_info`'s, by transaction id,
    /// ordered by purchase date then id.
    public let transactions: [ReceiptTransaction]
    public let pendingRenewals: [PendingRenewalInfo]
    /// The newest receipt for the subscription, when the App Store sent one; the app may store it.
    public let latestReceipt: String?
    public let receiptCreationDate: Date?
    /// When the App Store answered: the receipt's `request_date` when it has one, else when the
    /// answer arrived.
    public let answeredAt: Date
    /// The App Store's whole answer, byte for byte as it came: the ledger keeps it beside the receipt.
    public let answer: Data

    public init(
        environment: StoreEnvironment,
        bundleId: String,
        receiptSHA256: String,
        status: ReceiptStatus,
        style: Style,
        transactions: [ReceiptTransaction],
        pendingRenewals: [PendingRenewalInfo],
        latestReceipt: String?,
        receiptCreationDate: Date?,
        answeredAt: Date = Date(),
        answer: Data = Data()
    ) {
        self.answeredAt = answeredAt
        self.answer = answer
        self.environment = environment
        self.bundleId = bundleId
        self.receiptSHA256 = receiptSHA256
        self.status = status
        self.style = style
        self.transactions = transactions
        self.pendingRenewals = pendingRenewals
        self.latestReceipt = latestReceipt
        self.receiptCreationDate = receiptCreationDate
    }

    /// What the ledger records of this answer: every field of every transaction and renewal-info
    /// entry, as the App Store sent it. Nothing is judged here.
    public var appStoreAnswer: AppStoreAnswer {
        AppStoreAnswer(
            receiptHash: receiptSHA256, answerHash: answerSHA256, environment: environment, status: status.code,
            answeredAt: answeredAt, transactions: transactions.map(\.fields), renewalInfo: pendingRenewals.map(\.fields)
        )
    }

    /// The receipt as posted and the App Store's answer, as the ledger keeps them.
    public func document(app: String, receiptData: String) -> AppStoreDocument {
        AppStoreDocument(app: app, receiptHash: receiptSHA256, receiptData: receiptData, answerHash: answerSHA256,
                         environment: environment.rawValue, status: status.code, answeredAt: answeredAt, answer: answer)
    }

    /// SHA-256 (hex) of `answer`.
    public var answerSHA256: String {
        AppStoreReceiptVerifier.sha256Hex(answer)
    }

    /// The transaction with this id, if the receipt has it.
    public func transaction(_ id: String) -> ReceiptTransaction? {
        transactions.first { $0.transactionId == id }
    }
}
