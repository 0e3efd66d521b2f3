import Logging
import PostgresNIO

extension LedgerDatabase {
    /// Whether every login role of the server may still connect to the ledger's database (PUBLIC
    /// holds CONNECT), and so take its advisory locks: migration 0018 revokes it when the owner may.
    public static func everyRoleMayConnect(_ client: DatabasePool, logger: Logger) async throws -> Bool {
        let rows = try await client.query("SELECT has_database_privilege('public', current_database(), 'CONNECT')", logger: logger).collect()
        return try rows.first?.decode(Bool.self) ?? false
    }
}
