import Foundation

/// A key an audit summary can be broken down by. Currency is always a key, chosen or not:
/// amounts in different currencies are never added up.
public enum AuditGrouping: String, Sendable, Codable, Hashable, CaseIterable {
    /// The UTC calendar day of `occurred_at`.
    case day
    case product
    case currency
    case environment
    /// The buyer's App Store country (Apple's `storefront`, ISO 3166-1 alpha-3).
    case storefront

    /// Groupings from a comma-separated list such as `day,product`.
    public static func parse(list text: String, field: String = "groupBy") throws(AuditQueryError) -> Set<AuditGrouping> {
        var groupings = Set<AuditGrouping>()
        for part in text.split(separator: ",", omittingEmptySubsequences: false) {
            let name = part.trimmingCharacters(in: .whitespaces)
            guard let grouping = AuditGrouping(rawValue: name) else {
                throw .invalidFilter(field: field, "'\(name)' is not a summary grouping: use day, product, currency, environment or storefront, comma-separated")
            }
            groupings.insert(grouping)
        }
        return groupings
    }
}

extension AuditGrouping {
    /// The groupings a summary uses: those asked for, and the environment whenever the filter
    /// reads both, so that sandbox and production totals are never added together.
    public static func effective(_ requested: Set<AuditGrouping>, for filter: AuditFilter) -> Set<AuditGrouping> {
        filter.environment == .all ? requested.union([.environment]) : requested
    }
}
