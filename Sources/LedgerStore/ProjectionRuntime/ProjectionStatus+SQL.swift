import Foundation
import LedgerApplication
import Logging
import PostgresNIO

extension ProjectionStatus {
    /// The status query: one row per version, in constant time (see the type's comment).
    static let query: PostgresQuery = """
        SELECT p.name, p.version, p.status, p.position, h.head, p.checkpoint_moved_at,
               extract(epoch FROM clock_timestamp() - p.checkpoint_moved_at)::float8,
               extract(epoch FROM clock_timestamp() - (
                   SELECT e.recorded_at FROM ledger.events e WHERE e.position > p.position ORDER BY e.position LIMIT 1
               ))::float8,
               p.error, p.error_position
        FROM ledger.projections p
        CROSS JOIN (SELECT coalesce(max(e.position), 0) AS head FROM ledger.events e) h
        ORDER BY p.name, (p.status = 'live') DESC, p.version DESC
        """

    /// Every projection version the database knows, live ones first.
    public static func all(_ client: DatabasePool, logger: Logger) async throws -> [ProjectionStatus] {
        let rows = try await client.query(query, logger: logger)
        var result: [ProjectionStatus] = []
        for try await (name, version, status, position, head, movedAt, sinceMoved, pending, error, errorPosition) in rows.decode(
            (String, Int, String, Int64, Int64, Date, Double, Double?, String?, Int64?).self
        ) {
            guard let state = ProjectionState(rawValue: status) else {
                throw StoreError.integrity("ledger.projections holds status '\(status)', which this version does not know")
            }
            result.append(ProjectionStatus(
                name: name, version: version, status: state, position: position, head: head, checkpointMovedAt: movedAt,
                secondsSinceMoved: max(0, sinceMoved), pendingSeconds: pending.map { max(0, $0) }, error: error,
                errorPosition: errorPosition
            ))
        }
        return result
    }
}
