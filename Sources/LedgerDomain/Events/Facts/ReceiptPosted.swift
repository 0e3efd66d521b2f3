import Foundation

/// A device posted a receipt and the App Store verified it: who posted it, what the device said
/// it showed for the purchase it was delivering, and which transactions the answer listed.
/// Recorded with the observations that post brought (and only when it brought some).
public struct ReceiptPosted: LedgerEvent {
    public static let typeName = try! EventTypeName("ReceiptPosted", version: 1)
    /// SHA-256 (hex) of the receipt as posted; the receipt itself is in `ledger.receipts`.
    public let receiptHash: String
    /// SHA-256 (hex) of the App Store's answer; the answer is in `ledger.receipt_answers`.
    public let answerHash: String
    public let deviceId: String
    public let environment: StoreEnvironment
    /// The App Store's status: 0, or 21006 (valid, but the subscription has expired).
    public let status: Int
    /// When the App Store answered (its `request_date`).
    public let answeredAt: Date
    /// What the device's product info showed for the purchase it was delivering, if it said.
    public let price: String?
    public let currency: String?
    /// Every transaction id the answer listed, in its order.
    public let transactionIds: [String]
}
