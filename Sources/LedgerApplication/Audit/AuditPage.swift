/// One page of audit trail rows, in (position, event) order.
public struct AuditPage: Sendable {
    /// The most rows a page holds.
    public static let maximumSize = 10_000

    public let rows: [AuditRow]
    /// Where the next page starts; nil when this page is the last.
    public let nextCursor: AuditCursor?

    public init(rows: [AuditRow], nextCursor: AuditCursor?) {
        self.rows = rows
        self.nextCursor = nextCursor
    }
}
