import Foundation
import LedgerStore
import LedgerTesting
import LocalPostgres
import PostgresNIO
import Testing

/// The managed PostgreSQL needs its superuser's password only to create the cluster, its roles and
/// its database: the password lives in a file of its own, and once the ledger has started the
/// file can go; the ledger's own start (what `ledger serve` does first) works without it.
@Suite struct LocalPostgresSuperuserTests {
    @Test func theLedgerStartsItsPostgreSQLWithoutTheSuperusersPasswordOnDisk() async throws {
        let home = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-superuser-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        var environment = ProcessInfo.processInfo.environment
        environment["LEDGER_HOME"] = home.path
        environment["LEDGER_POSTGRES_PORT"] = String(Int.random(in: 20_000...32_000))
        let local = LocalPostgres(environment: environment, durability: .throwaway)
        defer {
            try? local.stop(mode: .immediate)
            try? FileManager.default.removeItem(at: home)
        }
        _ = try await local.start(logger: TestDatabase.logger)
        // Apart from the file the server's roles' passwords are in, mode 0600.
        let state = try String(contentsOf: local.stateFile, encoding: .utf8)
        #expect(!state.contains("superuser"), "\(state)")
        let attributes = try FileManager.default.attributesOfItem(atPath: local.superuserPasswordFile.path)
        #expect((attributes[.posixPermissions] as? Int) == 0o600)
        #expect(try local.administratorSettings() != nil)

        try FileManager.default.removeItem(at: local.superuserPasswordFile)
        try local.stop(mode: .fast)
        let runtime = try await local.start(logger: TestDatabase.logger)
        let owner = try #require(try local.ownerSettings())
        for settings in [runtime, owner] {
            try await TestDatabase.withConnection(settings) { connection in
                let rows = try await connection.query("SELECT current_user::text", logger: TestDatabase.logger).collect()
                #expect(try rows.first?.decode(String.self) == settings.username)
            }
        }
        #expect(try local.administratorSettings() == nil, "no superuser work without its password")
    }
}
