import Foundation

/// What an API key is allowed to do; every route needs one scope (see `APIRoute`).
public enum APIScope: String, CaseIterable, Codable, Hashable, Sendable, Comparable {
    /// Post receipts and what the app did (finish, failures, consumptions, restores).
    case ingest
    /// Entitlements, balances, subscriptions and history.
    case read
    /// The audit routes.
    case finance
    /// Product definitions and revocations.
    case admin

    /// Scopes from their names, such as `ingest, read`; an unknown name is refused, naming it.
    public static func parse(_ names: some Sequence<String>) throws(AccessError) -> Set<APIScope> {
        var scopes = Set<APIScope>()
        for name in names {
            let trimmed = name.trimmingCharacters(in: .whitespaces).lowercased()
            guard !trimmed.isEmpty else { continue }
            guard let scope = APIScope(rawValue: trimmed) else {
                throw .invalidInput("'\(trimmed)' is not a scope; the scopes are \(allNames)")
            }
            scopes.insert(scope)
        }
        return scopes
    }

    /// `ingest, read, finance, admin`, for messages.
    public static var allNames: String { allCases.map(\.rawValue).joined(separator: ", ") }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}
