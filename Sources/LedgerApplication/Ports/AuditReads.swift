/// Finance's reads of the audit trail and the restores, one app at a time (see `AuditPage` for
/// the order and the cursors). Money is decimal text, never added across currencies.
public protocol AuditReads: Sendable {
    /// Up to `limit` rows after `cursor` (from the start when nil), and the cursor of the next page.
    func events(app: String, filter: AuditFilter, after cursor: AuditCursor?, limit: Int) async throws -> AuditPage

    /// Totals of the rows the filter selects, by currency and the chosen groupings.
    func summary(app: String, filter: AuditFilter, groupBy: Set<AuditGrouping>) async throws -> [AuditSummaryRow]

    /// Products money was taken for that the catalog does not define.
    func unclassified(app: String) async throws -> [UnclassifiedProduct]

    /// Non-renewing periods restored to devices, by when the restore was recorded.
    func restores(app: String, filter: AuditFilter, after cursor: AuditRestoreCursor?, limit: Int) async throws -> AuditRestorePage
}

extension AuditReads {
    /// Calls `body` with every row the filter selects, in order, reading `pageSize` rows at a
    /// time: memory stays flat however long the trail. Returns how many rows it passed on.
    @discardableResult
    public func forEachEvent(
        app: String, filter: AuditFilter = AuditFilter(), pageSize: Int = 1_000, _ body: (AuditRow) async throws -> Void
    ) async throws -> Int {
        var cursor: AuditCursor?
        var count = 0
        repeat {
            let page = try await events(app: app, filter: filter, after: cursor, limit: pageSize)
            for row in page.rows {
                try await body(row)
                count += 1
            }
            cursor = page.nextCursor
        } while cursor != nil
        return count
    }
}
