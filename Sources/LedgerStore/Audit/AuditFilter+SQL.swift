import LedgerDomain
import PostgresNIO

extension PostgresQuery.StringInterpolation {
    /// The filter's conditions on `ledger.audit_trail`, each as ` AND …` with its value bound, so
    /// that the rows and the totals always select the same rows. A condition left out of the
    /// filter adds nothing.
    mutating func appendInterpolation(conditionsOf filter: AuditFilter) {
        if let from = filter.from {
            appendLiteral(" AND occurred_at >= ")
            appendInterpolation(from)
        }
        if let to = filter.to {
            appendLiteral(" AND occurred_at < ")
            appendInterpolation(to)
        }
        if !filter.events.isEmpty {
            appendLiteral(" AND event = ANY(")
            appendInterpolation(filter.events.map(\.rawValue))
            appendLiteral("::text[])")
        }
        if let product = filter.productId {
            appendLiteral(" AND product_id = ")
            appendInterpolation(product)
        }
        if let user = filter.userId {
            appendLiteral(" AND user_id = ")
            appendInterpolation(user)
        }
        if let environment = filter.environment {
            appendLiteral(" AND environment = ")
            appendInterpolation(environment.rawValue)
        }
    }
}
