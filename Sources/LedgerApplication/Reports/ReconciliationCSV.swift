import Foundation

/// A reconciliation as RFC 4180 CSV (as `AuditCSV`): one line per grain, Apple's figures beside
/// the ledger's, the status, and each explanation as `code: message`, separated by ` | `.
public enum ReconciliationCSV {
    public static let header = AuditCSV.line([
        "day", "product_id", "country", "currency", "price", "apple_units_sold", "ledger_units_sold", "apple_units_refunded",
        "ledger_units_refunded", "apple_amount_sold", "ledger_amount_sold", "apple_amount_refunded", "ledger_amount_refunded",
        "apple_proceeds", "proceeds_currency", "ledger_proceeds", "ledger_proceeds_currency", "proceeds_source", "status", "explanations",
        "transactions",
    ])

    public static func line(_ row: Reconciliation.Row) -> String {
        AuditCSV.line([
            row.day, AuditCSV.text(row.productId), row.country, row.currency, row.price, String(row.apple.unitsSold),
            String(row.ledger.unitsSold), String(row.apple.unitsRefunded), String(row.ledger.unitsRefunded), row.apple.amountSold,
            row.ledger.amountSold, row.apple.amountRefunded, row.ledger.amountRefunded, row.appleProceeds, row.proceedsCurrency,
            row.ledgerProceeds, row.ledgerProceedsCurrency, row.proceedsSource?.rawValue, row.status.rawValue, row.explanations.map { "\($0.code.rawValue): \($0.message)" }.joined(separator: " | "),
            row.transactions.map(AuditCSV.text).joined(separator: " "),
        ])
    }

    public static func document(_ reconciliation: Reconciliation) -> String {
        ([header] + reconciliation.rows.map(line)).joined()
    }
}
