import Foundation
import LedgerDomain

/// One App Store transaction for tests, written as the App Store writes it: field by field.
public struct TestTransaction: Sendable {
    public var fields: [String: String]

    /// 2025-01-01, the default purchase date of test transactions.
    public static let defaultDate = Date(timeIntervalSince1970: 1_735_689_600)

    /// An auto-renewable period gets a line item of its own unless one is given (a restore shares its payment's).
    public init(
        _ id: String, _ product: String, original: String? = nil, quantity: Int = 1, purchased: Date = TestTransaction.defaultDate,
        expires: Date? = nil, lineItem: String? = nil, cancelled: Date? = nil, extra: [String: String] = [:]
    ) {
        var fields = ["transaction_id": id, "original_transaction_id": original ?? id, "product_id": product,
                      "quantity": String(quantity), "purchase_date_ms": String(purchased.milliseconds),
                      "in_app_ownership_type": "PURCHASED"]
        if let expires {
            fields["expires_date_ms"] = String(expires.milliseconds)
            fields["web_order_line_item_id"] = lineItem ?? "wol-\(id)"
        }
        if let cancelled { fields["cancellation_date_ms"] = String(cancelled.milliseconds) }
        self.fields = fields.merging(extra) { _, extra in extra }
    }

    /// A purchase of the consumable `coins`, bought on 2025-01-01.
    public static func coins(_ id: String, quantity: Int = 1) -> TestTransaction {
        TestTransaction(id, "coins", quantity: quantity)
    }

    public var transactionId: String { fields["transaction_id"]! }
}

/// App Store answers for tests, and the receipt decision over them.
public enum TestReceipts {
    public static func answer(
        _ transactions: [TestTransaction], environment: StoreEnvironment = .production, status: Int = 0,
        answeredAt: Date = TestTransaction.defaultDate, renewalInfo: [[String: String]] = [], receipt: String = "receipt"
    ) -> AppStoreAnswer {
        AppStoreAnswer(
            receiptHash: digest("receipt \(receipt)") + digest("r2 \(receipt)") + digest("r3 \(receipt)") + digest("r4 \(receipt)"),
            answerHash: digest("answer \(receipt) \(answeredAt.milliseconds)") + digest("a2") + digest("a3") + digest("a4"),
            environment: environment, status: status, answeredAt: answeredAt,
            transactions: transactions.map(\.fields), renewalInfo: renewalInfo
        )
    }

    /// What posting these transactions decides on `state`.
    public static func observe(
        _ transactions: [TestTransaction], app: String = "com.example.app", device: String = "phone",
        price: String? = nil, currency: String? = nil, environment: StoreEnvironment = .production, status: Int = 0,
        answeredAt: Date = TestTransaction.defaultDate, excluding: Set<String> = [], on state: UserLedger
    ) throws(DecisionError) -> ReceiptDecision {
        try UserDecisions.observeReceipt(
            answer(transactions, environment: environment, status: status, answeredAt: answeredAt), app: app, deviceId: device,
            price: price, currency: currency, excluding: excluding, digest: digest, on: state
        )
    }

    /// A stable 16-hex-digit FNV-1a digest: enough to key test content (production uses SHA-256).
    public static func digest(_ text: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }
}
