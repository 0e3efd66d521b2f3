import Foundation
import LedgerProjections
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

/// `ledger projections rebuild --all` as an operator runs it, killed with SIGKILL halfway, then run
/// again: the rows are those of a rebuild that was never interrupted.
@Suite("A rebuild killed halfway and run again gives the rows an uninterrupted one gives")
struct ProjectionRebuildCrashTests {
    static let logger = TestDatabase.logger

    /// The `ledger` program `swift build` made beside the tests.
    static var program: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/debug/ledger")
    }

    /// Starts `ledger projections rebuild --all` against the database, its output in a file.
    static func startRebuild(_ settings: DatabaseSettings, log: URL) throws -> ChildProcess {
        guard FileManager.default.createFile(atPath: log.path, contents: nil) else {
            throw HarnessError(message: "cannot create \(log.path)")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["LEDGER_DATABASE_URL"] = settings.url(showingPassword: true)
        return try ChildProcess(program, ["projections", "rebuild", "--all"], environment: environment, output: .file(log.path), error: .output)
    }

    /// Runs a whole rebuild; fails the test with its output when it does not succeed.
    static func rebuild(_ settings: DatabaseSettings, log: URL) async throws {
        let process = try startRebuild(settings, log: log)
        let deadline = ContinuousClock.now + .seconds(300)
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.terminate()
                throw HarnessError(message: "ledger projections rebuild --all did not finish within 300 s")
            }
            try await Task.sleep(for: .milliseconds(20))
        }
        let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
        #expect(process.terminationStatus == 0, "ledger projections rebuild --all: \(output.suffix(2_000))")
    }

    /// Every row of every projection's view, as JSON text, sorted; and every checkpoint.
    static func snapshot(_ client: DatabasePool) async throws -> [String: [String]] {
        var snapshot: [String: [String]] = [:]
        for projection in Projections.all {
            let rows = try await client.query(
                PostgresQuery(unsafeSQL: "SELECT row_to_json(t)::text FROM ledger.\(projection.name.rawValue) t ORDER BY 1"), logger: logger
            ).collect()
            snapshot[projection.name.rawValue] = try rows.map { try $0.decode(String.self) }
        }
        let checkpoints = try await client.query(
            "SELECT name || ' v' || version || ' ' || status || ' at ' || position FROM ledger.projections ORDER BY 1", logger: logger
        ).collect()
        snapshot["checkpoints"] = try checkpoints.map { try $0.decode(String.self) }
        return snapshot
    }

    /// Rebuilt tables not switched over yet.
    static func unswitched(_ client: DatabasePool) async throws -> Int64 {
        let rows = try await client.query(
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'ledger' AND tablename LIKE '%\\_rebuild'", logger: logger
        ).collect()
        return try rows.first?.decode(Int64.self) ?? 0
    }

    @Test func aRebuildKilledHalfwayAndRunAgainGivesTheRowsOfAnUninterruptedOne() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: Self.program.path),
                     "build the program first (`swift build --build-tests` builds it): \(Self.program.path)")
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-rebuild-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await TestDatabase.withDatabase { client, settings in
            _ = try await ProjectionRunnerTests.seed(client, users: 400)
            let head = try await PostgresEventStore(client: client, logger: Self.logger).headPosition()

            try await Self.rebuild(settings, log: directory.appendingPathComponent("uninterrupted.log"))
            let uninterrupted = try await Self.snapshot(client)
            #expect(uninterrupted["checkpoints"]?.count == Projections.all.count)
            #expect(uninterrupted["checkpoints"]?.allSatisfy { $0.hasSuffix("live at \(head)") } == true, "\(uninterrupted["checkpoints"] ?? [])")

            // Killed once its rebuilt tables are written and before all of them are switched over:
            // some projections switched, others not. The window is short; a run that finishes first
            // is simply run (and killed) again.
            var killedHalfway = false
            for attempt in 0..<8 where !killedHalfway {
                let process = try Self.startRebuild(settings, log: directory.appendingPathComponent("killed-\(attempt).log"))
                while process.isRunning {
                    if try await Self.unswitched(client) > 0 {
                        kill(process.processIdentifier, SIGKILL)
                        break
                    }
                    try await Task.sleep(for: .milliseconds(2))
                }
                process.waitUntilExit()
                let left = try await Self.unswitched(client)
                killedHalfway = process.terminationReason == .uncaughtSignal && left > 0
            }
            #expect(killedHalfway, "no run was caught halfway")

            try await Self.rebuild(settings, log: directory.appendingPathComponent("again.log"))
            let again = try await Self.snapshot(client)
            #expect(try await Self.unswitched(client) == 0, "nothing half-built is left behind")
            for name in uninterrupted.keys.sorted() {
                #expect(again[name] == uninterrupted[name], "\(name): \(again[name]?.count ?? 0) rows against \(uninterrupted[name]?.count ?? 0)")
            }
        }
    }
}
