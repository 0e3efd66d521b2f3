import Foundation
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
        answeredAt: Date = Date()
    ) {
        self.answeredAt = answeredAt
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

    /// The transactions in the ledger's terms, for `UserDecisions.recordReceipt`.
    ///
    /// A StoreKit restore of an auto-renewable period is a new transaction carrying the expiry of
    /// the period it restores, so by its own fields it looks like a renewal (money taken). What
    /// gives it away is its `web_order_line_item_id`, which it shares with the transaction that
    /// paid for the period: of the transactions sharing one, the earliest is the payment and the
    /// others are restores. (A restore whose payment is not in the receipt cannot be told apart.)
    public var verifiedTransactions: [VerifiedTransaction] {
        var payments: [String: ReceiptTransaction] = [:]
        for transaction in transactions where transaction.expiresDate != nil {
            guard let lineItem = transaction.webOrderLineItemId else { continue }
            if let earlier = payments[lineItem],
               (earlier.purchaseDate, earlier.transactionId) <= (transaction.purchaseDate, transaction.transactionId) { continue }
            payments[lineItem] = transaction
        }
        return transactions.map { transaction in
            var verified = transaction.verified(in: environment)
            if status.code == 21006, transaction.expiresDate != nil { verified.expiryReportedAt = answeredAt }
            guard transaction.kind == .renewal, let lineItem = transaction.webOrderLineItemId,
                  let payment = payments[lineItem], payment.transactionId != transaction.transactionId
            else { return verified }
            return VerifiedTransaction(
                kind: .restore, transactionId: verified.transactionId, originalTransactionId: verified.originalTransactionId,
                productId: verified.productId, quantity: verified.quantity, purchaseDate: verified.purchaseDate,
                expiresDate: verified.expiresDate, cancellationDate: verified.cancellationDate, environment: verified.environment
            )
        }
    }

    /// The transaction with this id, if the receipt has it.
    public func transaction(_ id: String) -> ReceiptTransaction? {
        transactions.first { $0.transactionId == id }
    }
}
