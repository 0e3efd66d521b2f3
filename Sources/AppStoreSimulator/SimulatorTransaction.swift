import AppStore
import Foundation
import LedgerDomain

/// A transaction as the simulator keeps it: the App Store's side of one payment, renewal or restore.
public struct SimulatorTransaction: Codable, Hashable, Sendable {
    public let transactionId: String
    public let originalTransactionId: String
    public let userId: String
    public let bundleId: String
    public let productId: String
    public let productType: ProductType
    public let quantity: Int
    public let purchaseDate: Date
    public let originalPurchaseDate: Date
    /// Auto-renewables only: the end of the period this transaction paid for.
    public let expiresDate: Date?
    public let webOrderLineItemId: String?
    /// Set when support cancels (refunds) the transaction.
    public internal(set) var cancellationDate: Date?
    public internal(set) var cancellationReason: Int?
}
