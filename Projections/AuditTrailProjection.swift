import Foundation
import LedgerDomain

/// `ledger.audit_trail`: one row per money-relevant event, for finance.
///
/// Purchases, renewals, upgrades and crossgrades are money taken; a refund row repeats the refunded
/// transaction's amount (finance subtracts it). Restores, re-identified periods, re-purchases of
/// owned items and family-shared access take no money and have no row; an upgrade ends the old
/// period without a refund row. Every row says where its price comes from (`price_source`): the
/// device's report, the catalog's price when the fact was recorded, or a free trial's zero.
/// `revoked` says whether the transaction has since been refunded. Sandbox rows carry
/// `environment = 'sandbox'`: totals must filter on it, they are never revenue.
///
/// `occurred_at` is when the money moved, the time finance reports by: the App Store purchase
/// date for purchases and renewals, and the refund's `revokedAt` (Apple's cancellation date, or
/// the time support gave) for refunds. `recorded_at` is when the ledger learnt of it, which for a
/// receipt posted late can be days after. Version 2 added `occurred_at`, the refund's own
/// `recorded_at` (version 1 repeated `revokedAt` there) and the index for app-filtered scans.
/// Version 3 classifies with `TransactionClassifier` over recorded facts and adds `price_source`,
/// `catalog_price` and `offer`.
public enum AuditTrailProjection: UserProjection {
    public static let name = ProjectionName.auditTrail
    public static let version = 3

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("position", "bigint NOT NULL", "log position of the event"),
        ProjectionColumn("occurred_at", "timestamptz NOT NULL",
                         "when the money moved: the purchase date for purchases and renewals, the refund date (revokedAt) for refunds"),
        ProjectionColumn("recorded_at", "timestamptz", "when the ledger recorded it"),
        ProjectionColumn("environment", "text NOT NULL", "production or sandbox"),
        ProjectionColumn("device_id", "text", "the device that bought it"),
        ProjectionColumn("event", "text NOT NULL", "purchase, renewal, upgrade, crossgrade or refund"),
        ProjectionColumn("transaction_id", "text NOT NULL", "App Store transaction id"),
        ProjectionColumn("original_transaction_id", "text NOT NULL", "its original transaction"),
        ProjectionColumn("product_id", "text NOT NULL", "the product"),
        ProjectionColumn("product_type", "text NOT NULL", "as the catalog said when recorded; unknown when it did not know"),
        ProjectionColumn("quantity", "bigint NOT NULL", "units"),
        ProjectionColumn("price", "numeric", "price per unit; NULL when no source knows it (unpriced)"),
        ProjectionColumn("currency", "text", "ISO 4217 code of price"),
        ProjectionColumn("price_source", "text NOT NULL",
                         "device (reported with the post), catalog (in force when recorded), trial (zero) or none"),
        ProjectionColumn("catalog_price", "numeric", "the catalog's price when the device reported a different one (flagged, not replaced)"),
        ProjectionColumn("offer", "text NOT NULL", "none, free_trial or intro_offer"),
        ProjectionColumn("purchase_date", "timestamptz NOT NULL", "App Store purchase date"),
        ProjectionColumn("expires_date", "timestamptz", "auto-renewable period end"),
        ProjectionColumn("revoked", "boolean NOT NULL", "the transaction has been refunded or revoked"),
    ]
    public static let keyColumns = ["position", "event"]
    /// Finance reads one app at a time in (position, event) order, or by period.
    public static let indexes = [["app", "position", "event"], ["app", "occurred_at"]]

    public struct Row: ProjectionRow {
        public let event: AuditEventKind
        public let transaction: UserLedger.Transaction
        /// Where in the log the money moved: the transaction's position, or its revocation's.
        public let position: Int64
        public let occurredAt: Date
        public let recordedAt: Date?

        public var columnValues: [String?] {
            [String(position), Self.text(occurredAt), Self.text(recordedAt), transaction.environment.rawValue, transaction.deviceId,
             event.rawValue, transaction.transactionId, transaction.originalTransactionId, transaction.productId,
             transaction.productType.rawValue, String(transaction.quantity), transaction.price, transaction.currency,
             transaction.priceSource.rawValue, transaction.catalogPrice, transaction.offer.rawValue,
             Self.text(transaction.purchaseDate), Self.text(transaction.expiresDate), transaction.isRevoked ? "true" : "false"]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        var rows: [Row] = []
        for transaction in state.transactionsInOrder where transaction.kind.isPayment && !transaction.isFamilyShared {
            rows.append(Row(event: AuditEventKind(transaction.kind), transaction: transaction,
                            position: transaction.position, occurredAt: transaction.purchaseDate, recordedAt: transaction.recordedAt))
            if let revokedPosition = transaction.revokedPosition, let revokedAt = transaction.revokedAt {
                rows.append(Row(event: .refund, transaction: transaction, position: revokedPosition, occurredAt: revokedAt,
                                recordedAt: transaction.revocationRecordedAt))
            }
        }
        return rows
    }
}
