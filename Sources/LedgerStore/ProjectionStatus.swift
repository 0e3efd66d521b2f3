import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// Where a projection version is in its life, as `ledger.projections.status` stores it.
public enum ProjectionState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Catching up with the log beside the live version; readers do not see it yet.
    case building
    /// What readers see: the view `ledger.<name>` points at its table.
    case live
    /// Stopped at an event it could not apply; `error` and `error_position` say which and why.
    case failed
    /// Replaced by a newer version; its table is dropped.
    case retired
}

/// What `ledger projections status` shows for one projection version.
public struct ProjectionStatus: Sendable, Hashable {
    public let name: String
    public let version: Int
    public let status: ProjectionState
    public let position: Int64
    /// Events in the log after the checkpoint.
    public let lagEvents: Int64
    /// Age of the oldest event not yet applied, in seconds (0 when caught up).
    public let lagSeconds: Double
    public let error: String?
    public let errorPosition: Int64?

    /// Every projection version the database knows, live ones first.
    public static func all(_ client: PostgresClient, logger: Logger) async throws -> [ProjectionStatus] {
        let rows = try await client.query(
            """
            SELECT p.name, p.version, p.status, p.position,
                   (SELECT count(*) FROM ledger.events e WHERE e.position > p.position),
                   coalesce(extract(epoch FROM now() - (SELECT min(e.recorded_at) FROM ledger.events e WHERE e.position > p.position))::float8, 0),
                   p.error, p.error_position
            FROM ledger.projections p
            ORDER BY p.name, (p.status = \(ProjectionState.live)) DESC, p.version DESC
            """,
            logger: logger
        )
        var result: [ProjectionStatus] = []
        for try await (name, version, status, position, lag, seconds, error, errorPosition) in rows.decode(
            (String, Int, String, Int64, Int64, Double, String?, Int64?).self
        ) {
            guard let state = ProjectionState(rawValue: status) else {
                throw StoreError.integrity("ledger.projections holds status '\(status)', which this version does not know")
            }
            result.append(ProjectionStatus(
                name: name, version: version, status: state, position: position, lagEvents: lag,
                lagSeconds: seconds, error: error, errorPosition: errorPosition
            ))
        }
        return result
    }
}
