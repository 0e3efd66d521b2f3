import Foundation
import LedgerStore
import Logging

extension LedgerDatabase {
    /// The server's role: `LEDGER_DATABASE_URL` when given, otherwise the managed local server, started if needed.
    public static func resolve(url: String?, logger: Logger) async throws -> DatabaseSettings {
        try await resolveRoles(url: url, ownerURL: nil, logger: logger).runtime
    }

    /// Both roles: the server's (`url`, else the managed server's) with its session timeouts, and
    /// the owner's (`ownerURL`, else the managed server's owner; unknown for another server).
    public static func resolveRoles(url: String?, ownerURL: String?, logger: Logger) async throws -> DatabaseRoles {
        let owner = try ownerURL.flatMap { $0.isEmpty ? nil : try DatabaseSettings(url: $0) }
        if let url, !url.isEmpty {
            var runtime = try DatabaseSettings(url: url)
            runtime.sessionSettings = DatabaseSettings.runtimeTimeouts
            return DatabaseRoles(runtime: runtime, owner: owner)
        }
        let local = LocalPostgres()
        let runtime = try await local.start(logger: logger)
        return DatabaseRoles(runtime: runtime, owner: try owner ?? local.ownerSettings())
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
