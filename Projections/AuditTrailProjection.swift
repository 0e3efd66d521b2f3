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
/// Version 5 adds the fold's judgement of subscription service (`SubscriptionService`: how each
/// auto-renewable row moved its subscription, until when it was current, when its stretch of paid
/// service ended, when a trial converted) and each money row's place among its user's (the user's
/// first payment, the user's previous money row in the same currency), from which the metrics add
/// up without rebuilding every subscription at every request.
public enum AuditTrailProjection: UserProjection {
    public static let name = ProjectionName.auditTrail
    public static let version = 5

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
        ProjectionColumn("service", "text",
                         "auto-renewable purchases, renewals, upgrades and crossgrades: how the row moved its subscription (trial, new, reactivated, renewed, upgraded, crossgraded or downgraded); NULL for a refunded or unpriced period"),
        ProjectionColumn("current_until", "timestamptz", "paid periods: until when the row is its subscription's current period (from its start, exclusive)"),
        ProjectionColumn("service_ends", "timestamptz", "the last paid period of a stretch of paid service: when the stretch ends"),
        ProjectionColumn("converted_at", "timestamptz", "free trials: when the paid period that converted it started"),
        ProjectionColumn("grace_until", "timestamptz",
                         "a paid period in a billing grace period (the App Store retrying the renewal's charge, the customer keeping access): when the grace period ends"),
        ProjectionColumn("cohort_start", "timestamptz", "money rows: when the user's first payment (an amount above zero) in this environment happened"),
        ProjectionColumn("previous_money_at", "timestamptz", "money rows: when the user's previous money row in this environment and currency happened"),
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
        /// The fold's judgement of the row's subscription service (purchases and renewals only).
        public var service: SubscriptionService.Judgement?
        public var graceUntil: Date?
        public var cohortStart: Date?
        public var previousMoneyAt: Date?

        init(event: AuditEventKind, transaction: UserLedger.Transaction, position: Int64, occurredAt: Date, recordedAt: Date?) {
            self.event = event
            self.transaction = transaction
            self.position = position
            self.occurredAt = occurredAt
            self.recordedAt = recordedAt
        }

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
             transaction.storefront, service?.movement.rawValue, Self.text(service?.currentUntil), Self.text(service?.serviceEnds),
             Self.text(service?.convertedAt), Self.text(graceUntil), Self.text(cohortStart), Self.text(previousMoneyAt)]
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
        // The fold's periods say which the App Store's billing grace period extends past their expiry.
        var graceUntil: [String: Date] = [:]
        for period in state.autoRenewablePeriods(catalog: catalog) {
            guard let transaction = state.transactions[period.transactionId], let expires = transaction.expiresDate,
                  period.end.milliseconds > expires.milliseconds else { continue }
            graceUntil[period.transactionId] = period.end
        }
        let service = SubscriptionService.judge(state.transactionsInOrder, graceUntil: graceUntil)
        for index in rows.indices where rows[index].event != .refund {
            let id = rows[index].transaction.transactionId
            rows[index].service = service[id]
            if rows[index].service.map({ $0.movement != .trial }) == true { rows[index].graceUntil = graceUntil[id] }
        }
        placeAmongTheUsersMoney(&rows)
        return rows
    }

    /// Each money row's cohort (the user's first payment in its environment) and the user's money
    /// row before it in the same environment and currency, in order of when the money moved.
    static func placeAmongTheUsersMoney(_ rows: inout [Row]) {
        let posix = Locale(identifier: "en_US_POSIX")
        let money = rows.indices.filter { rows[$0].amount != nil }
            .sorted { (rows[$0].occurredAt, rows[$0].position, rows[$0].event == .refund ? 1 : 0) < (rows[$1].occurredAt, rows[$1].position, rows[$1].event == .refund ? 1 : 0) }
        var firstPayment: [StoreEnvironment: Date] = [:]
        for index in money where rows[index].event != .refund {
            let environment = rows[index].transaction.environment
            if firstPayment[environment] == nil, let amount = rows[index].amount.flatMap({ Decimal(string: $0, locale: posix) }), amount > 0 {
                firstPayment[environment] = rows[index].occurredAt
            }
        }
        struct Place: Hashable { let environment: StoreEnvironment; let currency: String? }
        var previous: [Place: Date] = [:]
        for index in money {
            let place = Place(environment: rows[index].transaction.environment, currency: rows[index].transaction.currency)
            rows[index].cohortStart = firstPayment[place.environment]
            rows[index].previousMoneyAt = previous[place]
            previous[place] = rows[index].occurredAt
        }
    }
}
