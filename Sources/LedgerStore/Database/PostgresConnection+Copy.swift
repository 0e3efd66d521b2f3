import LedgerApplication
import Logging
import PostgresNIO

extension PostgresConnection {
    /// `COPY table (columns) FROM STDIN` with the rows `writeData` writes, that fails when the
    /// connection closes instead of waiting for ever.
    ///
    /// postgres-nio's `copyFrom` can wait for ever when the server goes away mid-copy (PostgreSQL
    /// stopped at once under load: projections hung that way and never followed the log again).
    func copyRows(
        into table: String, columns: [String], logger: Logger,
        _ writeData: @escaping @Sendable (PostgresCopyFromWriter) async throws -> Void
    ) async throws {
        try await unlessClosed(during: "a COPY into \(table)") {
            try await self.copyFrom(table: table, columns: columns, logger: logger, writeData: writeData)
        }
    }
}
