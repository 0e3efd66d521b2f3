import LedgerDomain

/// `ledger.device_deliveries`: which device received which purchase or restored period, and when.
public enum DeviceDeliveriesProjection: UserProjection {
    public static let name = ProjectionName.deviceDeliveries
    /// Version bumped with `TransactionClassifier.version` 2: rows now follow the classifier over recorded facts.
    public static let version = 2

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("device_id", "text NOT NULL", "the device"),
        ProjectionColumn("transaction_id", "text NOT NULL", "what it received"),
        ProjectionColumn("product_id", "text", "the product of that transaction"),
        ProjectionColumn("kind", "text NOT NULL", "purchase, restore (StoreKit) or subscription_restore (non-renewing periods restored by the ledger)"),
        ProjectionColumn("position", "bigint NOT NULL", "log position of the delivery"),
        ProjectionColumn("delivered_at", "timestamptz", "when the ledger recorded it"),
    ]
    public static let keyColumns = ["device_id", "transaction_id", "kind"]

    public struct Row: ProjectionRow {
        public let delivery: UserLedger.Delivery
        public let productId: String?

        public var columnValues: [String?] {
            [delivery.deviceId, delivery.transactionId, productId, delivery.kind.rawValue, String(delivery.position),
             Self.text(delivery.recordedAt)]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        var seen = Set<[String]>()
        return state.deliveries.compactMap { delivery in
            guard seen.insert([delivery.deviceId, delivery.transactionId, delivery.kind.rawValue]).inserted else { return nil }
            return Row(delivery: delivery, productId: state.transactions[delivery.transactionId]?.productId)
        }
    }
}
