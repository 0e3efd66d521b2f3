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
            _ = try? await query("ROLLBACK", logger: logger)
            throw error
        }
        try await query("COMMIT", logger: logger)
        return result
    }
}
