@testable import AppStore
import Foundation
import LedgerDomain
import Testing

@Suite struct ReceiptTransactionTests {
    @Test func classificationFollowsIdsAndExpiry() {
        let expiry = Date()
        #expect(ReceiptTransaction.classify(transactionId: "1", originalTransactionId: "1", expiresDate: expiry) == .purchase)
        #expect(ReceiptTransaction.classify(transactionId: "2", originalTransactionId: "1", expiresDate: expiry) == .renewal)
        #expect(ReceiptTransaction.classify(transactionId: "2", originalTransactionId: "1", expiresDate: nil) == .restore)
        #expect(ReceiptTransaction.classify(transactionId: "1", originalTransactionId: "1", expiresDate: nil) == .purchase)
    }

    @Test func theLedgersViewKeepsIdsDatesAndRefund() {
        let purchased = Date(timeIntervalSince1970: 1_356_998_400)
        let transaction = ReceiptTransaction(
            transactionId: "2", originalTransactionId: "1", productId: "monthly", quantity: 1,
            purchaseDate: purchased, originalPurchaseDate: purchased.addingTimeInterval(-300),
            expiresDate: purchased.addingTimeInterval(300), cancellationDate: purchased.addingTimeInterval(60),
            cancellationReason: 1, isTrialPeriod: false, isInIntroOfferPeriod: false, webOrderLineItemId: "77"
        )
        let verified = transaction.verified(in: .sandbox)
        #expect(verified == VerifiedTransaction(
            kind: .renewal, transactionId: "2", originalTransactionId: "1", productId: "monthly", quantity: 1,
            purchaseDate: purchased, expiresDate: purchased.addingTimeInterval(300),
            cancellationDate: purchased.addingTimeInterval(60), environment: .sandbox
        ))
        #expect(transaction.isRevoked)
    }
}
