import Foundation
import LedgerDomain

/// App Store transactions for tests of the command layer.
public enum TestTransactions {
    /// A verified purchase of the consumable `coins`, bought on 2025-01-01.
    public static func coins(_ id: String, quantity: Int = 1) -> VerifiedTransaction {
        VerifiedTransaction(
            kind: .purchase, transactionId: id, originalTransactionId: id, productId: "coins", quantity: quantity,
            purchaseDate: Date(timeIntervalSince1970: 1_735_689_600), environment: .production
        )
    }
}
