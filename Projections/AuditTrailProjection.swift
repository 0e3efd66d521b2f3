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
/// `catalog_price` and `offer`. Version 4 adds `amount` (the money of the row: Apple's signed
/// price is the whole quantity's, not a unit price; a refund row's is what the refund gave back,
/// a share of the amount for a prorated refund, nothing for a family revocation), the refund's
/// kind, and the buyer's `storefront`; a row's currency is the one in force when it happened.
public enum AuditTrailProjection: UserProjection {
    public static let name = ProjectionName.auditTrail
    public static let version = 4

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
        ProjectionColumn("quantity", "bigint NOT NULL", "units (for a refund: the units it took back)"),
        ProjectionColumn("price", "numeric", "price per unit; NULL when no source knows it (unpriced)"),
        ProjectionColumn("currency", "text", "ISO 4217 code of price"),
        // Before version 4 a row's money was price × quantity, a refund's all of it.
        ProjectionColumn("amount", "numeric",
                         "the row's money: the whole quantity's (Apple's signed price as it is, else price × quantity); for a refund, what it gave back; NULL when unpriced",
                         formerly: "trim_scale(r.price * r.quantity)"),
        ProjectionColumn("price_source", "text NOT NULL",
                         "app_store (Apple's signed price), device (reported with the post), catalog (in force when recorded), trial (zero) or none"),
        ProjectionColumn("catalog_price", "numeric", "the catalog's price when the device or Apple said a different one (flagged, not replaced)"),
        ProjectionColumn("offer", "text NOT NULL", "none, free_trial or intro_offer"),
        ProjectionColumn("purchase_date", "timestamptz NOT NULL", "App Store purchase date"),
        ProjectionColumn("expires_date", "timestamptz", "auto-renewable period end"),
        ProjectionColumn("revoked", "boolean NOT NULL", "the transaction has been refunded or revoked"),
        ProjectionColumn("refund", "text", "refund rows: full, prorated or family_revoke",
                         formerly: "CASE WHEN r.event = 'refund' THEN 'full' END"),
        ProjectionColumn("refund_share", "integer", "prorated refunds: the refunded share in milliunits of a percent (40000 = 40 %)"),
        ProjectionColumn("storefront", "text",
                         "the buyer's App Store country (ISO 3166-1 alpha-3) from Apple's signed transaction; NULL when only verifyReceipt receipts spoke of it"),
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

        /// Units of the row: the transaction's, or for a refund those it took back.
        public var quantity: Int { event == .refund ? transaction.refundedUnits : transaction.quantity }
        /// Money of the row: the transaction's whole amount, or for a refund what it gave back.
        public var amount: String? { event == .refund ? transaction.refundedAmount : transaction.amount }

        public var columnValues: [String?] {
            [String(position), Self.text(occurredAt), Self.text(recordedAt), transaction.environment.rawValue, transaction.deviceId,
             event.rawValue, transaction.transactionId, transaction.originalTransactionId, transaction.productId,
             transaction.productType.rawValue, String(quantity), transaction.price, transaction.currency, amount,
             transaction.priceSource.rawValue, transaction.catalogPrice, transaction.offer.rawValue,
             Self.text(transaction.purchaseDate), Self.text(transaction.expiresDate), transaction.isRevoked ? "true" : "false",
             event == .refund ? transaction.refund?.kind.rawValue : nil, event == .refund ? transaction.refund?.share.map(String.init) : nil,
             transaction.storefront]
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
