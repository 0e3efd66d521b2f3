import Foundation
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

    /// The key that seals App Store shared secrets: `LEDGER_SECRET_KEY` or `LEDGER_SECRET_KEY_FILE`
    /// when set; else, with the managed local server (no `url`), the key file under the ledger's
    /// home, made on first use, so that a ledger with nothing configured keeps its secrets sealed;
    /// else none (secrets cannot be set until a key is configured).
    public static func resolveSecrets(
        url: String?, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws -> SecretSealer? {
        if let sealer = try SecretSealer.fromEnvironment(environment) { return sealer }
        guard url?.isEmpty ?? true else { return nil }
        return try SecretSealer.loadOrCreate(file: LocalPostgres(environment: environment).secretKeyFile)
    }
}
