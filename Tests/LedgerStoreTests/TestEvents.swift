import LedgerDomain
import LedgerProjections
import LedgerStore
import LedgerTesting

extension NewEvent {
    /// A small purchase-like event for tests.
    static func purchase(_ transactionID: String, app: String = "com.example.app", deduplicate: Bool = true) throws -> NewEvent {
        try NewEvent(
            type: EventTypeName("PurchaseRecorded", version: 1),
            data: #"{"transactionId":"\#(transactionID)","productId":"coins.100","quantity":1}"#,
            metadata: #"{"requestId":"test"}"#,
            deduplicationKey: deduplicate
                ? .appStoreTransaction(app: app, environment: .sandbox, kind: .payment, transactionID: transactionID)
                : nil
        )
    }
}

/// A row of a projection written for a test, as the text its columns hold.
struct TextRow: ProjectionRow {
    let columnValues: [String?]
}
