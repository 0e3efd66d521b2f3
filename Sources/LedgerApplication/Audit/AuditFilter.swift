import Foundation
import LedgerDomain
import LedgerProjections

/// Which audit trail rows a query reads. Every condition is optional; together they all apply.
public struct AuditFilter: Sendable, Hashable {
    /// Half-open period on `occurred_at`: rows with `from <= occurred_at < to`.
    public var from: Date?
    public var to: Date?
    /// Empty means every kind.
    public var events: [AuditEventKind]
    public var productId: String?
    public var userId: String?
    /// ISO 4217 code such as `USD`: rows priced in it (unpriced rows carry no currency).
    public var currency: String?
    /// true: rows with a price only; false: unpriced rows only (they are in no amount).
    public var priced: Bool?
    /// Rows of products of this type only (as classified when the row was made; `unknown` for
    /// products the catalog did not define).
    public var productType: ProductType?
    /// Production unless asked: sandbox money is never revenue, so it is never mixed in unasked.
    public var environment: AuditEnvironment

    public init(
        from: Date? = nil, to: Date? = nil, events: [AuditEventKind] = [], productId: String? = nil,
        userId: String? = nil, currency: String? = nil, priced: Bool? = nil, productType: ProductType? = nil, environment: AuditEnvironment = .production
    ) {
        self.from = from
        self.to = to
        self.events = events
        self.productId = productId
        self.userId = userId
        self.currency = currency
        self.priced = priced
        self.productType = productType
        self.environment = environment
    }

    /// Refuses filters that can only be a mistake: an empty or reversed period, empty ids.
    public func validate() throws(AuditQueryError) {
        if let from, let to, from >= to {
            throw .invalidFilter(
                field: "from",
                "from (\(LedgerJSON.formatTimestamp(from))) must be before to (\(LedgerJSON.formatTimestamp(to))): the period is [from, to)"
            )
        }
        if productId?.isEmpty == true { throw .invalidFilter(field: "productId", "productId is empty: give a product id or leave it out") }
        if userId?.isEmpty == true { throw .invalidFilter(field: "userId", "userId is empty: give a user id or leave it out") }
        if let currency, currency.utf8.count != 3 || !currency.utf8.allSatisfy({ (65...90).contains($0) }) {
            throw .invalidFilter(field: "currency", "currency '\(currency)' is not an ISO 4217 code such as USD or EUR (three capital letters)")
        }
    }

    /// An environment from its name: `production`, `sandbox` or `all`.
    public static func environment(named name: String, field: String = "environment") throws(AuditQueryError) -> AuditEnvironment {
        guard let environment = AuditEnvironment(rawValue: name) else {
            throw .invalidFilter(field: field, "environment '\(name)' is not one of \(AuditEnvironment.allCases.map(\.rawValue).joined(separator: ", "))")
        }
        return environment
    }

    /// A time in ISO 8601, e.g. `2026-01-31T00:00:00Z`.
    public static func time(_ text: String, field: String) throws(AuditQueryError) -> Date {
        guard let date = LedgerJSON.parseTimestamp(text) else {
            throw .invalidFilter(field: field, "\(field) '\(text)' is not an ISO 8601 time such as 2026-01-31T00:00:00Z")
        }
        return date
    }
}
