import LedgerProjections

/// A user's rows in the read models (the projections), for the read routes.
public protocol UserReads: Sendable {
    /// The position every named projection has reached: the smallest of their live checkpoints.
    /// Throws `ReadError` (`projections_behind`) when one of them has no live version.
    func checkpoint(of projections: [ProjectionName]) async throws -> Int64

    /// Waits until every named projection reflects the log up to `position`, at most `timeout`;
    /// returns the checkpoint reached, or throws `ReadError` when time runs out.
    func waitForProjections(_ projections: [ProjectionName], toReach position: Int64, timeout: Duration) async throws -> Int64

    /// A user's entitlement rows as of the projections' checkpoint `position` (or later).
    func entitlementRows(app: String, user: String, at position: Int64) async throws -> EntitlementRows
}
