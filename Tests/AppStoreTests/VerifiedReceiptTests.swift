@testable import AppStore
import Foundation
import LedgerDomain
import Testing

@Suite struct VerifiedReceiptTests {
    static let start = Date(timeIntervalSince1970: 1_790_000_000)

    static func transaction(_ id: String, lineItem: String, purchased minutes: Double, expires: Double) -> ReceiptTransaction {
        ReceiptTransaction(
            transactionId: id, originalTransactionId: "100", productId: "pro.monthly", quantity: 1,
            purchaseDate: start.addingTimeInterval(minutes * 60), originalPurchaseDate: start,
            expiresDate: start.addingTimeInterval(expires * 60), cancellationDate: nil, cancellationReason: nil,
            isTrialPeriod: false, isInIntroOfferPeriod: false, webOrderLineItemId: lineItem
        )
    }

    static func receipt(_ transactions: [ReceiptTransaction]) -> VerifiedReceipt {
        VerifiedReceipt(
            environment: .sandbox, bundleId: "com.example.app", receiptSHA256: "00", status: ReceiptStatus(code: 0), style: .appReceipt,
            transactions: transactions, pendingRenewals: [], latestReceipt: nil, receiptCreationDate: nil
        )
    }

    @Test func aRestoredSubscriptionPeriodIsARestoreNotAPaidRenewal() {
        let receipt = Self.receipt([
            Self.transaction("100", lineItem: "W1", purchased: 0, expires: 5),
            Self.transaction("101", lineItem: "W2", purchased: 5, expires: 10),
            // Restored on a new device at minute 7: a new id, the expiry and line item of the period it restores.
            Self.transaction("102", lineItem: "W2", purchased: 7, expires: 10),
        ])
        let kinds = Dictionary(uniqueKeysWithValues: receipt.verifiedTransactions.map { ($0.transactionId, $0.kind) })
        #expect(kinds == ["100": .purchase, "101": .renewal, "102": .restore])
    }

    @Test func renewalsWithTheirOwnLineItemsStayRenewals() {
        let receipt = Self.receipt([
            Self.transaction("100", lineItem: "W1", purchased: 0, expires: 5),
            Self.transaction("101", lineItem: "W2", purchased: 5, expires: 10),
            Self.transaction("102", lineItem: "W3", purchased: 10, expires: 15),
        ])
        #expect(receipt.verifiedTransactions.map(\.kind) == [.purchase, .renewal, .renewal])
    }
}
