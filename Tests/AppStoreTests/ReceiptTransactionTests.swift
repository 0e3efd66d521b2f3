@testable import AppStore
import Foundation
import LedgerDomain
import Testing

@Suite struct ReceiptTransactionTests {
    @Test("every field of a transaction is kept as text, whatever JSON type Apple used; nulls are left out")
    func fieldsAreKeptAsText() throws {
        let entry = LenientJSON([
            "transaction_id": "2", "original_transaction_id": "1", "product_id": "monthly", "quantity": 1,
            "purchase_date_ms": "1356998400000", "is_trial_period": false, "web_order_line_item_id": "77",
            "promotional_offer_id": NSNull(), "offer_code_ref_name": "SPRING",
        ] as [String: Any])
        let transaction = try ReceiptResponseParser.transaction(entry)
        #expect(transaction.fields == [
            "transaction_id": "2", "original_transaction_id": "1", "product_id": "monthly", "quantity": "1",
            "purchase_date_ms": "1356998400000", "is_trial_period": "false", "web_order_line_item_id": "77",
            "offer_code_ref_name": "SPRING",
        ])
    }

    @Test("where in_app and latest_receipt_info both list a transaction, the later view's fields win and nothing is lost")
    func viewsAreMerged() throws {
        let older = try ReceiptResponseParser.transaction(LenientJSON([
            "transaction_id": "2", "product_id": "monthly", "purchase_date_ms": "1356998400000", "is_in_intro_offer_period": "false",
        ] as [String: Any]))
        let newer = try ReceiptResponseParser.transaction(LenientJSON([
            "transaction_id": "2", "product_id": "monthly", "purchase_date_ms": "1356998400000", "cancellation_date_ms": "1356998460000",
        ] as [String: Any]))
        let merged = older.updated(by: newer)
        #expect(merged.fields["cancellation_date_ms"] == "1356998460000")
        #expect(merged.fields["is_in_intro_offer_period"] == "false")
        #expect(merged.isRevoked)
    }
}
