import LedgerApplication
import LedgerDomain
import PostgresNIO

extension PostgresQuery.StringInterpolation {
    /// The filter's conditions on `ledger.audit_trail`, each as ` AND …` with its value bound, so
    /// that the rows and the totals always select the same rows. A condition left out of the
    /// filter adds nothing.
    mutating func appendInterpolation(conditionsOf filter: AuditFilter) {
        appendCondition("occurred_at >= ", filter.from)
        appendCondition("occurred_at < ", filter.to)
        if !filter.events.isEmpty {
            appendLiteral(" AND event = ANY(")
            appendInterpolation(filter.events.map(\.rawValue))
            appendLiteral("::text[])")
        }
        appendCondition("product_id = ", filter.productId)
        appendCondition("user_id = ", filter.userId)
        appendCondition("currency = ", filter.currency)
        appendCondition("product_type = ", filter.productType?.rawValue)
        if let priced = filter.priced { appendLiteral(priced ? " AND price IS NOT NULL" : " AND price IS NULL") }
        appendCondition("environment = ", filter.environment.only?.rawValue)
    }

    /// ` AND <comparison><value>`, or nothing when there is no value.
    private mutating func appendCondition<Value: PostgresDynamicTypeEncodable>(_ comparison: String, _ value: Value?) {
        guard let value else { return }
        appendLiteral(" AND " + comparison)
        appendInterpolation(value)
    }
}
