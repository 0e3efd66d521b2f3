import LedgerStore
import Logging

extension LedgerDatabase {
    /// `LEDGER_DATABASE_URL` when given, otherwise the managed local server, started if needed.
    public static func resolve(url: String?, logger: Logger) async throws -> DatabaseSettings {
        if let url, !url.isEmpty {
            return try DatabaseSettings(url: url)
        }
        return try await LocalPostgres().start(logger: logger)
    }
}
