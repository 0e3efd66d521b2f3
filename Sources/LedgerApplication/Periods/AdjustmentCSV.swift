import Foundation
import LedgerDomain

/// Adjustments as RFC 4180 CSV, under the same rules as the audit trail's (`AuditCSV`).
public enum AdjustmentCSV {
    public static let header = AuditCSV.line([
        "closed_period", "booked_in", "kind", "position", "event", "user_id", "transaction_id", "environment", "product_id", "currency",
        "quantity_before", "quantity_after", "amount_before", "amount_after", "net_change", "cause", "cause_position", "cause_type",
        "cause_recorded_at", "cause_message",
    ])

    public static func line(_ row: PeriodAdjustment) -> String {
        AuditCSV.line([
            row.closedPeriod, row.bookedIn, row.kind.rawValue, String(row.position), row.event, AuditCSV.text(row.userId),
            AuditCSV.text(row.transactionId), row.environment.rawValue, AuditCSV.text(row.productId), row.currency,
            row.quantityBefore.map(String.init), row.quantityAfter.map(String.init), row.amountBefore, row.amountAfter, row.netChange,
            row.cause.kind.rawValue, row.cause.position.map(String.init), row.cause.type, row.cause.recordedAt.map(LedgerJSON.formatTimestamp),
            row.cause.message,
        ])
    }

    /// JSON with ISO 8601 UTC times, as the API answers.
    public static let encoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(LedgerJSON.formatTimestamp(date))
        }
        return encoder
    }()
}
