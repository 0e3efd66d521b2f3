import LedgerDomain

/// `ledger.device_deliveries`: which device received which purchase or restored period, and when.
public enum DeviceDeliveriesProjection: UserProjection {
    public static let name = "device_deliveries"
    public static let version = 1

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("device_id", "text NOT NULL", "the device"),
        ProjectionColumn("transaction_id", "text NOT NULL", "what it received"),
        ProjectionColumn("product_id", "text", "the product of that transaction"),
        ProjectionColumn("kind", "text NOT NULL", "purchase, restore (StoreKit) or subscription_restore (non-renewing periods restored by the ledger)"),
        ProjectionColumn("position", "bigint NOT NULL", "log position of the delivery"),
        ProjectionColumn("delivered_at", "timestamptz", "when the ledger recorded it"),
    ]
    public static let keyColumns = ["device_id", "transaction_id", "kind"]

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]] {
        var seen = Set<[String]>()
        return state.deliveries.compactMap { delivery in
            guard seen.insert([delivery.deviceId, delivery.transactionId, delivery.kind.rawValue]).inserted else { return nil }
            return [delivery.deviceId, delivery.transactionId, state.transactions[delivery.transactionId]?.productId,
                    delivery.kind.rawValue, String(delivery.position), text(delivery.recordedAt)]
        }
    }
}
