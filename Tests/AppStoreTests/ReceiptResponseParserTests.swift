@testable import AppStore
import Foundation
import LedgerDomain
import Testing

/// Fixtures in the real service's shapes, parsed as the client parses a live answer.
@Suite struct ReceiptResponseParserTests {
    private func parse(_ name: String, answeredBy: StoreEnvironment = .production) throws -> VerifiedReceipt {
        let body = Data(try fixture(name).utf8)
        let root = try #require(LenientJSON(data: body))
        let status = ReceiptStatus(code: try #require(root["status"].int))
        return try ReceiptResponseParser(receiptSHA256: "abc", answeredBy: answeredBy).parse(root, status: status, answer: body)
    }

    /// A 21006 answer is a fact about each subscription transaction in it: the App Store said, at
    /// that moment, that the subscription had expired. The client reports it as said, with when;
    /// what it means (support cancelled a period still running) is the fold's to judge.
    @Test func status21006ReportsTheExpiryOfEachSubscriptionTransactionWithWhenTheAnswerCame() throws {
        let root = try #require(LenientJSON(data: Data(try fixture("old_style_auto_renewable_expired").utf8)))
        let answeredAt = Date(milliseconds: 1_370_900_000_000) // 2013-06-10: inside the second week
        let parsed = try ReceiptResponseParser(receiptSHA256: "abc", answeredBy: .production).parse(root, status: ReceiptStatus(code: 21006))
        let receipt = VerifiedReceipt(
            environment: parsed.environment, bundleId: parsed.bundleId, receiptSHA256: parsed.receiptSHA256, status: parsed.status,
            style: parsed.style, transactions: parsed.transactions, pendingRenewals: parsed.pendingRenewals,
            latestReceipt: parsed.latestReceipt, receiptCreationDate: parsed.receiptCreationDate, answeredAt: answeredAt
        )
        // What the ledger records: the status and when the App Store answered, for the fold to judge.
        let answer = receipt.appStoreAnswer
        #expect(answer.status == 21006)
        #expect(answer.answeredAt == answeredAt)
        #expect(Set(answer.transactions.compactMap { $0["transaction_id"] }).isSuperset(of: ["1000000078112233", "1000000077341601"]))

        let valid = try parse("old_style_auto_renewable")
        #expect(valid.appStoreAnswer.status == 0, "status 0 reports no expiry")
    }

    @Test func longProductionAppReceiptYieldsEachTransactionOnce() throws {
        let receipt = try parse("production_app_receipt_long")
        #expect(receipt.environment == .production)
        #expect(receipt.bundleId == "com.example.news")
        #expect(receipt.style == .appReceipt)
        // 24 consumables, a non-consumable and 2 restores of it, 12 monthly periods in in_app and 2 more in latest_receipt_info.
        #expect(receipt.transactions.count == 41)
        #expect(Set(receipt.transactions.map(\.transactionId)).count == 41)
        #expect(receipt.transactions.filter { $0.kind == .purchase }.count == 24 + 1 + 1)
        #expect(receipt.transactions.filter { $0.kind == .restore }.count == 2)
        #expect(receipt.transactions.filter { $0.kind == .renewal }.count == 13)
        #expect(receipt.transactions.map(\.purchaseDate) == receipt.transactions.map(\.purchaseDate).sorted())
        let consumableQuantities = receipt.transactions.filter { $0.productId.contains("coins") }.map(\.quantity)
        #expect(consumableQuantities.reduce(0, +) == 48, "quantities 1, 2, 3 repeated over 24 purchases")
        let first = try #require(receipt.transactions.first { $0.productId == "com.example.news.monthly" && $0.kind == .purchase })
        #expect(first.isTrialPeriod)
        #expect(first.webOrderLineItemId == "230000000000000")
        #expect(first.expiresDate == first.purchaseDate.addingTimeInterval(30 * 86_400))
        let restores = receipt.transactions.filter { $0.kind == .restore }
        #expect(restores.allSatisfy { $0.originalTransactionId != $0.transactionId && $0.productId == "com.example.news.archive" })
        #expect(receipt.pendingRenewals == [PendingRenewalInfo(
            originalTransactionId: first.transactionId, productId: "com.example.news.monthly",
            autoRenewProductId: "com.example.news.yearly", willAutoRenew: true, expirationIntent: nil, isInBillingRetryPeriod: nil,
            fields: ["original_transaction_id": first.transactionId, "product_id": "com.example.news.monthly",
                     "auto_renew_product_id": "com.example.news.yearly", "auto_renew_status": "1"]
        )])
        #expect(receipt.latestReceipt == "MIIT...latest...==")
        #expect(receipt.receiptSHA256 == "abc")
    }

    @Test func oldStyleAutoRenewableReadsTheTopLevelTransactionAndTheLatestObject() throws {
        let receipt = try parse("old_style_auto_renewable", answeredBy: .sandbox)
        #expect(receipt.style == .transactionReceipt)
        #expect(receipt.environment == .sandbox, "no environment key: the endpoint that answered decides")
        #expect(receipt.bundleId == "com.example.magazine")
        #expect(receipt.transactions.map(\.transactionId) == ["1000000077341601", "1000000078112233"])
        let original = receipt.transactions[0]
        let renewal = receipt.transactions[1]
        #expect(original.kind == .purchase)
        #expect(renewal.kind == .renewal)
        #expect(renewal.originalTransactionId == original.transactionId)
        #expect(original.expiresDate == Date(milliseconds: 1_370_000_000_000 + 7 * 86_400_000), "expires_date in milliseconds")
        #expect(renewal.expiresDate == Date(milliseconds: 1_370_000_000_000 + 14 * 86_400_000))
        #expect(renewal.purchaseDate == original.expiresDate)
        #expect(receipt.latestReceipt?.isEmpty == false)
    }

    @Test func oldStyleExpiredReceiptStillCountsWithItsLastTransaction() throws {
        let receipt = try parse("old_style_auto_renewable_expired")
        #expect(receipt.status.code == 21006)
        #expect(receipt.transactions.map(\.kind) == [.purchase, .renewal])
        #expect(receipt.latestReceipt == nil)
    }

    @Test func oldStyleConsumableWithTextDatesOnly() throws {
        let receipt = try parse("old_style_consumable")
        #expect(receipt.bundleId == "com.example.game")
        let transaction = try #require(receipt.transactions.first)
        #expect(receipt.transactions.count == 1)
        #expect(transaction.quantity == 5)
        #expect(transaction.kind == .purchase)
        #expect(transaction.expiresDate == nil)
        #expect(transaction.purchaseDate == Date(timeIntervalSince1970: 1_356_998_400))
        #expect(transaction.isTrialPeriod == false)
    }

    @Test func sandboxSubscriptionRenewsEveryFiveMinutesSixTimes() throws {
        let receipt = try parse("sandbox_five_minute_renewals")
        #expect(receipt.environment == .sandbox)
        #expect(receipt.transactions.count == 7)
        #expect(receipt.transactions.filter { $0.kind == .renewal }.count == 6)
        for (previous, next) in zip(receipt.transactions, receipt.transactions.dropFirst()) {
            #expect(next.purchaseDate.timeIntervalSince(previous.purchaseDate) == 300)
            #expect(next.purchaseDate == previous.expiresDate)
        }
        #expect(receipt.pendingRenewals.first?.willAutoRenew == false)
        #expect(receipt.pendingRenewals.first?.expirationIntent == 1)
    }

    @Test func refundInLatestReceiptInfoRevokesTheTransactionInApp() throws {
        let receipt = try parse("refunded_transaction")
        #expect(receipt.transactions.count == 3)
        let refunded = try #require(receipt.transaction("1000000111111111"))
        #expect(refunded.isRevoked)
        #expect(refunded.cancellationReason == 0)
        #expect(refunded.cancellationDate == Date(milliseconds: 1_420_000_000_000 + 3 * 86_400_000))
        #expect(receipt.transaction("1000000111111112")?.isRevoked == false)
        #expect(receipt.transaction("1000000111111113")?.kind == .purchase, "a first subscription period is a purchase")
    }

    @Test func theAnswerTheLedgerRecordsCarriesEveryFieldAndTheReceiptsEnvironment() throws {
        let receipt = try parse("refunded_transaction")
        let answer = receipt.appStoreAnswer
        #expect(answer.transactions.count == 3)
        #expect(answer.environment == .production)
        let refunded = try #require(answer.transactions.first { $0["transaction_id"] == "1000000111111111" })
        #expect(refunded["cancellation_date_ms"] != nil)
        #expect(refunded["cancellation_reason"] == "0")
        #expect(!receipt.answer.isEmpty && answer.answerHash.count == 64, "the whole answer is kept, content-addressed")
        #expect(receipt.answer == Data(try fixture("refunded_transaction").utf8), "byte for byte as it came")
        let sandbox = try parse("sandbox_five_minute_renewals").appStoreAnswer
        #expect(sandbox.environment == .sandbox)
        #expect(sandbox.transactions.filter { $0["transaction_id"] != $0["original_transaction_id"] }.count == 6)
    }

    @Test func unknownKeysAreIgnoredAndMissingOptionalKeysDefault() throws {
        let text = #"""
            {"status":0,"brand_new_key":[1,2],"receipt":{"bundle_id":"com.example.min","in_app":[
              {"transaction_id":"9","product_id":"p","purchase_date_ms":"1356998400000","surprise":{"a":1}}]}}
            """#
        let root = try #require(LenientJSON(data: Data(text.utf8)))
        let receipt = try ReceiptResponseParser(receiptSHA256: "x", answeredBy: .production).parse(root, status: ReceiptStatus(code: 0))
        let transaction = try #require(receipt.transactions.first)
        #expect(transaction.quantity == 1)
        #expect(transaction.originalTransactionId == "9")
        #expect(transaction.originalPurchaseDate == transaction.purchaseDate)
        #expect(transaction.kind == .purchase)
        #expect(receipt.pendingRenewals.isEmpty)
    }

    @Test func aTransactionWithoutAnIdIsAMalformedAnswerNotASilentSkip() throws {
        let text = #"{"status":0,"receipt":{"bundle_id":"b","in_app":[{"product_id":"p","purchase_date_ms":"1"}]}}"#
        let root = try #require(LenientJSON(data: Data(text.utf8)))
        let error = try #require(throws: ReceiptVerificationError.self) {
            try ReceiptResponseParser(receiptSHA256: "x", answeredBy: .production).parse(root, status: ReceiptStatus(code: 0))
        }
        #expect(error.code == .malformedResponse)
        #expect(error.message.contains("transaction_id"))
    }

    /// The mutation fuzzer found it: a product id of 1,000 emoji outgrew the log's index entry, and
    /// the post failed with 500 after its receipt was kept.
    @Test func aProductIdLongerThanAnyTheAppStoreAllowsIsAMalformedAnswer() throws {
        let long = String(repeating: "😀", count: 1_000)
        let text = #"{"status":0,"receipt":{"bundle_id":"b","in_app":[{"transaction_id":"1","product_id":"\#(long)","purchase_date_ms":"1"}]}}"#
        let root = try #require(LenientJSON(data: Data(text.utf8)))
        let error = try #require(throws: ReceiptVerificationError.self) {
            try ReceiptResponseParser(receiptSHA256: "x", answeredBy: .production).parse(root, status: ReceiptStatus(code: 0))
        }
        #expect(error.code == .malformedResponse)
        #expect(error.message.contains("transaction 1 names a product id of 4000 bytes; a product id has at most 255"))
    }
}

/// The shape of a transaction by its ids and expiry, for checking what a receipt lists. What it
/// means (purchase, renewal, restore, upgrade) is the ledger's classifier's to say, not the client's.
enum TransactionShape: Equatable { case purchase, renewal, restore }

extension ReceiptTransaction {
    var kind: TransactionShape {
        guard transactionId != originalTransactionId else { return .purchase }
        return expiresDate == nil ? .restore : .renewal
    }
}
