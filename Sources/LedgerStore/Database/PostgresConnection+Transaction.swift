import LedgerApplication
import Logging
import PostgresNIO

extension PostgresConnection {
    /// Runs `body` in one transaction and rethrows its error unchanged.
    ///
    /// postgres-nio's `withTransaction` wraps errors in `PostgresTransactionError`; the store
    /// branches on the SQLSTATE (unique violation, serialization failure), so it needs the original.
    func transaction<Result: Sendable>(
        logger: Logger,
        _ body: (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await query("BEGIN", logger: logger)
        let result: Result
        do {
            result = try await body(self)
        } catch {
            await rollBackUnlessClosed(logger: logger)
            throw error
        }
        try await query("COMMIT", logger: logger)
        return result
    }

    /// ROLLBACK after a failure, unless the connection is gone (PostgreSQL rolls back what a lost
    /// session had begun). Needed because postgres-nio 1.33.2 never answers a statement written to
    /// a connection that has closed: a ROLLBACK after a dropped connection waited for ever, and with
    /// it the projection or request that sent it. Given up, too, if the connection closes meanwhile.
    func rollBackUnlessClosed(logger: Logger) async {
        _ = try? await unlessClosed(during: "a ROLLBACK") {
            _ = try await self.allRows("ROLLBACK", logger: logger)
        }
    }
}
