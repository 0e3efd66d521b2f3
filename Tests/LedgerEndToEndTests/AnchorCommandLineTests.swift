import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `ledger audit anchor-key`, `anchor` and `verify --anchor` run as an operator runs them, their
/// exit statuses included: 0 intact, 1 altered, 3 an anchor that cannot be trusted.
@Suite struct AnchorCommandLineTests {
    @Test func anAnchorMadeAndKeptOutsideTheDatabaseNamesTheStreamsChangedSinceAndRefusesToBeForged() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            for user in ["alice", "bob"] {
                for index in 0..<3 {
                    let event = try NewEvent(type: EventTypeName("PurchaseRecorded", version: 1), data: #"{"transactionId":"\#(user)-\#(index)"}"#)
                    _ = try await store.append([event], to: try StreamID.user(app: "app", user: user), expecting: .any)
                }
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-anchor-cli-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(at: directory) }
            let (key, anchorFile) = (directory.appendingPathComponent("anchor.key").path, directory.appendingPathComponent("anchor.json").path)
            func ledger(_ arguments: String...) async throws -> CommandLineTests.Run {
                try await CommandLineTests.ledger(arguments, database: settings)
            }

            let created = try await ledger("audit", "anchor-key", "--out", key)
            #expect(created.status == 0, "\(created.errors)")
            #expect(created.output.hasPrefix("public key: "))
            #expect(try FileManager.default.attributesOfItem(atPath: key)[.posixPermissions] as? Int == 0o600)

            // To standard output on a full disk: the system's reason, not Foundation's error dump.
            let full = try await CommandLineTests.ledger(
                ["audit", "anchor", "--key", key, "--out", "-"], database: settings,
                output: try FileHandle(forWritingTo: URL(fileURLWithPath: "/dev/full"))
            )
            #expect(full.status == 1 && full.errors.contains("could not write the anchor: No space left on device"), "\(full.errors)")
            #expect(!full.errors.contains("NSCocoaErrorDomain"), "\(full.errors)")

            let anchored = try await ledger("audit", "anchor", "--key", key, "--out", anchorFile)
            #expect(anchored.status == 0, "\(anchored.errors)")
            #expect(anchored.errors.contains("6 events in 2 streams"), "\(anchored.errors)")

            let intact = try await ledger("audit", "verify", "--anchor", anchorFile, "--public-key", key + ".pub")
            #expect(intact.status == 0, "\(intact.output)\(intact.errors)")
            #expect(intact.output.contains("signed by the trusted key") && intact.output.contains("log intact"), "\(intact.output)")

            // bob's stream removed whole, behind the ledger's back.
            try await TestDatabase.withOwnerConnection(of: client) { connection in
                try await connection.query("GRANT DELETE ON ledger.events TO CURRENT_USER", logger: TestDatabase.logger)
                try await connection.query("ALTER TABLE ledger.events DISABLE TRIGGER USER", logger: TestDatabase.logger)
                try await connection.query("DELETE FROM ledger.events WHERE stream_id = 'user/app/bob'", logger: TestDatabase.logger)
                try await connection.query("ALTER TABLE ledger.events ENABLE TRIGGER USER", logger: TestDatabase.logger)
            }
            let chainsOnly = try await ledger("audit", "verify")
            #expect(chainsOnly.status == 0, "the chains alone cannot see a stream removed whole")
            let altered = try await ledger("audit", "verify", "--anchor", anchorFile, "--public-key", key + ".pub")
            #expect(altered.status == 1, "\(altered.output)\(altered.errors)")
            #expect(altered.output.contains("stream 'user/app/bob' was DELETED"), "\(altered.output)")
            #expect(altered.output.contains("3 of the 6 events"), "\(altered.output)")

            // The anchor edited to match the log: refused, with a status of its own.
            let text = try String(contentsOfFile: anchorFile, encoding: .utf8)
            let forgedFile = directory.appendingPathComponent("forged.json")
            try text.split(separator: "\n").filter { !$0.contains("user/app/bob") }.joined(separator: "\n")
                .replacingOccurrences(of: "\"streamCount\": 2", with: "\"streamCount\": 1")
                .write(to: forgedFile, atomically: true, encoding: .utf8)
            let forged = try await ledger("audit", "verify", "--anchor", forgedFile.path, "--public-key", key + ".pub")
            #expect(forged.status == 3, "\(forged.output)\(forged.errors)")
            #expect(forged.errors.contains("was changed after it was signed"), "\(forged.errors)")

            // Without a trusted key the anchor is not trusted: whoever rewrote the log can sign a new one.
            let stranger = try await ledger("audit", "anchor-key", "--out", directory.appendingPathComponent("stranger.key").path)
            #expect(stranger.status == 0, "\(stranger.errors)")
            let reanchored = directory.appendingPathComponent("reanchored.json").path
            #expect(try await ledger("audit", "anchor", "--key", directory.appendingPathComponent("stranger.key").path, "--out", reanchored).status == 0)
            let untrusted = try await ledger("audit", "verify", "--anchor", reanchored)
            #expect(untrusted.status == 3, "signed by any key is not enough: \(untrusted.output)\(untrusted.errors)")
            #expect(untrusted.errors.contains("--public-key FILE.pub") && untrusted.errors.contains("--trust-embedded-key"), "\(untrusted.errors)")
            let mine = try await ledger("audit", "verify", "--anchor", reanchored, "--public-key", key + ".pub")
            #expect(mine.status == 3, "\(mine.output)\(mine.errors)")
            // Asked for explicitly, the embedded key is checked and the output says so.
            let embedded = try await ledger("audit", "verify", "--anchor", anchorFile, "--trust-embedded-key")
            #expect(embedded.output.contains("NOT checked against a key you trust"), "\(embedded.output)")

            // A key others can read is refused, and no anchor is written.
            #expect(chmod(key, 0o644) == 0)
            let refused = try await ledger("audit", "anchor", "--key", key, "--out", directory.appendingPathComponent("second.json").path)
            #expect(refused.status != 0)
            #expect(refused.errors.contains("mode 0644") && refused.errors.contains("chmod 600"), "\(refused.errors)")
            #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("second.json").path))
        }
    }
}
