/// One page of restores, in (position, device, transaction) order.
public struct AuditRestorePage: Sendable {
    public let rows: [AuditRestore]
    /// Where the next page starts; nil when this page is the last.
    public let nextCursor: AuditRestoreCursor?

    public init(rows: [AuditRestore], nextCursor: AuditRestoreCursor?) {
        self.rows = rows
        self.nextCursor = nextCursor
    }
}
