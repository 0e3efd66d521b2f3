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
    /// Production unless asked: sandbox money is never revenue, so it is never mixed in unasked.
    public var environment: AuditEnvironment

    public init(
        from: Date? = nil, to: Date? = nil, events: [AuditEventKind] = [], productId: String? = nil,
        userId: String? = nil, environment: AuditEnvironment = .production
    ) {
        self.from = from
        self.to = to
        self.events = events
        self.productId = productId
        self.userId = userId
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
