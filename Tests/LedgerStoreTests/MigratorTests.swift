@testable import LedgerStore
import LedgerApplication
import LedgerTesting
import PostgresNIO
import Testing

@Suite("Migrations")
struct MigratorTests {
    @Test("running the migrations again applies nothing and changes nothing")
    func idempotent() async throws {
        try await TestDatabase.withDatabase { _, settings in
            let migrator = try Migrator.bundled()
            let again = try await TestDatabase.withConnection(try await TestDatabase.ownerSettings(for: settings)) { owner in
                try await migrator.migrate(owner, logger: TestDatabase.logger)
            }
            #expect(again.applied.isEmpty)
            #expect(again.alreadyApplied == migrator.migrations.count)
        }
    }

    @Test("two processes migrating at once apply each migration once")
    func concurrent() async throws {
        try await TestDatabase.withDatabase(migrate: false) { _, runtime in
            let settings = try await TestDatabase.ownerSettings(for: runtime)
            let migrator = try Migrator.bundled()
            let reports = try await withThrowingTaskGroup(of: Migrator.Report.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        try await TestDatabase.withConnection(settings) { connection in
                            try await migrator.migrate(connection, logger: TestDatabase.logger)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(reports.flatMap(\.applied).sorted() == migrator.migrations.map(\.name).sorted())
            let recorded = try await TestDatabase.withConnection(settings) { connection in
                try await connection.query("SELECT count(*) FROM ledger.schema_migrations", logger: TestDatabase.logger).collect()
            }
            #expect(try recorded[0].decode(Int.self) == migrator.migrations.count)
        }
    }

    @Test("a migration edited after it was applied is refused, naming the file")
    func editedMigration() async throws {
        try await TestDatabase.withDatabase { _, settings in
            let client = try await TestDatabase.ownerSettings(for: settings)
            let shipped = try Migrator.bundled().migrations
            var edited = shipped
            edited[0] = .init(version: shipped[0].version, name: shipped[0].name, sql: shipped[0].sql + "\n-- edited\n")
            let error = try await #require(throws: StoreError.self) {
                try await TestDatabase.withConnection(client) { try await Migrator(migrations: edited).migrate($0, logger: TestDatabase.logger) }
            }
            #expect(error.code == .migrationEdited)
            #expect(error.message.contains(shipped[0].name))
            #expect(error.message.contains("new numbered migration"))
        }
    }

    @Test("a failing migration is rolled back whole and reported")
    func failingMigration() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let owner = try await TestDatabase.ownerSettings(for: settings)
            let shipped = try Migrator.bundled().migrations
            let broken = Migrator.Migration(
                version: 9_999, name: "9999_broken.sql",
                sql: "CREATE TABLE ledger.half_done (x int);\nSELECT no_such_function();"
            )
            let error = try await #require(throws: StoreError.self) {
                try await TestDatabase.withConnection(owner) { try await Migrator(migrations: shipped + [broken]).migrate($0, logger: TestDatabase.logger) }
            }
            #expect(error.code == .migrationFailed)
            #expect(error.message.contains("9999_broken.sql"))
            let leftovers = try await client.query("SELECT to_regclass('ledger.half_done') IS NULL", logger: TestDatabase.logger).collect()
            #expect(try leftovers[0].decode(Bool.self))
        }
    }
}

@Suite("Migrations need the owner")
struct MigrationRoleTests {
    @Test("the server's role cannot migrate, and serving without the owner only checks that nothing is pending")
    func runtimeCannotMigrate() async throws {
        try await TestDatabase.withDatabase(migrate: false) { _, runtime in
            let roles = DatabaseRoles(runtime: runtime, owner: nil)
            let error = try await #require(throws: StoreError.self) { try await roles.prepareSchema(logger: TestDatabase.logger) }
            #expect(error.message.contains("LEDGER_OWNER_DATABASE_URL"))
            #expect(error.message.contains("0001_event_log.sql"))
            let owner = DatabaseRoles(runtime: runtime, owner: try await TestDatabase.ownerSettings(for: runtime))
            #expect(try await owner.prepareSchema(logger: TestDatabase.logger).applied.count == (try Migrator.bundled().migrations.count))
            #expect(try await roles.prepareSchema(logger: TestDatabase.logger).applied.isEmpty, "nothing pending: the check passes")
        }
    }

    @Test("the server's role cannot even start migrating a fresh database")
    func runtimeMemberRefused() async throws {
        try await TestDatabase.withDatabase(migrate: false) { _, runtime in
            var migrations = try Migrator.bundled().migrations
            migrations.removeAll { $0.version > 7 }
            // The first six need CREATE on the database, which the server's role lacks: the refusal
            // comes before 0007 is reached.
            let error = try await #require(throws: PSQLError.self) {
                try await TestDatabase.withConnection(runtime) { try await Migrator(migrations: migrations).migrate($0, logger: TestDatabase.logger) }
            }
            #expect(error.ledgerSQLState == .insufficientPrivilege)
        }
    }
}
