import Foundation
import LedgerDomain
import LedgerProjections

/// RFC 4180 CSV of audit rows and summaries: a header line, CRLF line ends, and a field quoted
/// (quotes doubled) when it holds a comma, a quote, CR or LF. NULL is an empty field; times are
/// ISO 8601 UTC with milliseconds; amounts are plain decimals.
///
/// Identifiers that devices and apps choose (user, device, product and transaction ids) that
/// begin with `=`, `+`, `-`, `@`, a tab or a carriage return get a leading `'`, as OWASP
/// recommends against CSV injection: a spreadsheet shows them as text instead of running them as
/// formulas. The JSON exports carry them unchanged.
public enum AuditCSV {
    public static let header = line([
        "position", "occurred_at", "recorded_at", "environment", "user_id", "device_id", "event", "transaction_id",
        "original_transaction_id", "product_id", "product_type", "quantity", "price", "currency", "amount",
        "price_source", "catalog_price", "offer", "purchase_date", "expires_date", "revoked", "refund", "refund_share", "storefront",
        "proceeds", "proceeds_currency", "proceeds_source",
    ])

    public static func line(_ row: AuditRow) -> String {
        line([
            String(row.position), LedgerJSON.formatTimestamp(row.occurredAt), row.recordedAt.map(LedgerJSON.formatTimestamp),
            row.environment.rawValue, text(row.userId), row.deviceId.map(text), row.event.rawValue, text(row.transactionId),
            text(row.originalTransactionId), text(row.productId), row.productType.rawValue, String(row.quantity), row.price, row.currency,
            row.amount, row.priceSource.rawValue, row.catalogPrice, row.offer.rawValue, LedgerJSON.formatTimestamp(row.purchaseDate), row.expiresDate.map(LedgerJSON.formatTimestamp),
            row.revoked ? "true" : "false", row.refund, row.refundShare.map(String.init), row.storefront.map(text),
            row.proceeds, row.proceedsCurrency, row.proceedsSource?.rawValue,
        ])
    }

    public static let summaryHeader = line([
        "day", "product_id", "currency", "environment", "storefront", "purchases", "units", "gross", "refunds", "refunded_units",
        "refunded_amount", "net", "unpriced", "proceeds", "refunded_proceeds", "net_proceeds", "proceeds_currency", "proceeds_source",
        "proceeds_unknown",
    ])

    public static func line(_ row: AuditSummaryRow) -> String {
        line([
            row.day, row.productId.map(text), row.currency, row.environment?.rawValue, row.storefront.map(text), String(row.purchases),
            String(row.units), row.gross,
            String(row.refunds), String(row.refundedUnits), row.refundedAmount, row.net, String(row.unpriced),
            row.proceeds, row.refundedProceeds, row.netProceeds, row.proceedsCurrency, row.proceedsSource.rawValue, String(row.proceedsUnknown),
        ])
    }

    /// An identifier as a cell a spreadsheet does not evaluate.
    public static func text(_ value: String) -> String {
        guard let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) else { return value }
        return "'" + value
    }

    /// One record, CRLF-terminated; nil is an empty field.
    public static func line(_ fields: [String?]) -> String {
        fields.map { field($0 ?? "") }.joined(separator: ",") + "\r\n"
    }

    /// A field, quoted when RFC 4180 requires it.
    public static func field(_ value: String) -> String {
        guard value.unicodeScalars.contains(where: { $0 == "," || $0 == "\"" || $0 == "\r" || $0 == "\n" }) else { return value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

extension AuditCSV {
    public static let restoreHeader = line(["position", "restored_at", "environment", "user_id", "device_id", "transaction_id", "product_id"])

    public static func line(_ row: AuditRestore) -> String {
        line([
            String(row.position), row.restoredAt.map(LedgerJSON.formatTimestamp), row.environment?.rawValue, text(row.userId), text(row.deviceId),
            text(row.transactionId), row.productId.map(text),
        ])
    }
}
