import LedgerApplication
import Logging
import PostgresNIO

extension PostgresConnection {
    /// `COPY table (columns) FROM STDIN` with the rows `writeData` writes, that fails when the
    /// connection closes instead of waiting for ever.
    ///
    /// postgres-nio's `copyFrom` can wait for ever when the server goes away mid-copy (PostgreSQL
    /// stopped at once under load: projections hung that way and never followed the log again).
    /// The connection is looked at every 100 ms rather than through `closeFuture`, whose callbacks
    /// would stay registered for as long as the pool keeps the connection, one per batch.
    func copyRows(
        into table: String, columns: [String], logger: Logger,
        _ writeData: @escaping @Sendable (PostgresCopyFromWriter) async throws -> Void
    ) async throws {
        try await untilAbandoned {
            try await self.copyFrom(table: table, columns: columns, logger: logger, writeData: writeData)
        } abandonWhen: {
            await self.waitUntilClosed().map { _ in
                StoreError.databaseUnavailable("the connection to PostgreSQL closed during a COPY into \(table)")
            }
        }
    }
}
