import LedgerDomain

/// `ledger.unfinished_transactions`: transactions recorded but never finished by a device.
///
/// An app that does not call finishTransaction after delivering keeps getting the transaction
/// back: the most common in-app purchase bug. Readers choose the threshold at read time, e.g.
/// `WHERE recorded_at < now() - interval '1 hour'`.
public enum UnfinishedTransactionsProjection: UserProjection {
    public static let name = ProjectionName.unfinishedTransactions
    /// Version bumped with `TransactionClassifier.version` 2: rows now follow the classifier over recorded facts.
    public static let version = 2

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("transaction_id", "text NOT NULL", "the transaction not finished"),
        ProjectionColumn("product_id", "text NOT NULL", "its product"),
        ProjectionColumn("kind", "text NOT NULL", "purchase, renewal or restore"),
        ProjectionColumn("device_id", "text", "the device it was delivered to"),
        ProjectionColumn("position", "bigint NOT NULL", "log position where it was recorded"),
        ProjectionColumn("recorded_at", "timestamptz", "when the ledger recorded it"),
    ]
    public static let keyColumns = ["transaction_id"]

    public struct Row: ProjectionRow {
        public let transaction: UserLedger.Transaction

        public var columnValues: [String?] {
            [transaction.transactionId, transaction.productId, transaction.kind.rawValue, transaction.deviceId,
             String(transaction.position), Self.text(transaction.recordedAt)]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        state.transactionsInOrder.filter { !state.isFinished($0.transactionId) }.map(Row.init(transaction:))
    }
}
