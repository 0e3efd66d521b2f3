/// Why an audit query was refused, with what to do about it.
///
/// The HTTP layer maps the code to a status (`invalidCursor` to 400 `invalid_cursor`, the others
/// to 400 `invalid_request` naming `field`, `notReady` to 503); the message is safe to show.
public struct AuditQueryError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// A filter value is malformed or the filters contradict each other.
        case invalidFilter
        /// The cursor is not one this ledger issued for this app.
        case invalidCursor
        /// The page size is out of range.
        case invalidLimit
        /// The audit trail's current version is not built yet.
        case notReady
    }

    public let code: Code
    public let message: String
    /// The request field at fault (`from`, `type`, `cursor`, `limit`, …), when there is one.
    public let field: String?

    private init(_ code: Code, _ message: String, field: String?) {
        self.code = code
        self.message = message
        self.field = field
    }

    public static func invalidFilter(field: String, _ message: String) -> Self {
        .init(.invalidFilter, message, field: field)
    }

    public static func invalidCursor(_ reason: String) -> Self {
        .init(.invalidCursor, "\(reason): pass the nextCursor of the previous page unchanged, with the same app, or leave it out to start from the beginning", field: "cursor")
    }

    public static func invalidLimit(_ limit: Int, maximum: Int) -> Self {
        .init(.invalidLimit, "limit \(limit) is out of range: ask for 1 to \(maximum) rows per page", field: "limit")
    }

    public static var notReady: Self {
        .init(.notReady, "the audit trail is still being built for this version of the ledger; retry once `ledger projections status` shows audit_trail live", field: nil)
    }

    public var description: String { message }
}
