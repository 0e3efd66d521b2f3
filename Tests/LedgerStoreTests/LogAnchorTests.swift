import Foundation
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("An anchor kept outside the database finds what the hash chains cannot")
struct LogAnchorTests {
    private static let users = ["alice", "bob", "carol", "caf\u{E9}", "cafe\u{301}"]

    private static func stream(_ user: String) throws -> StreamID {
        try StreamID.user(app: "app", user: user)
    }

    /// Three events in each user's stream; "café" is spelled two ways, which are two streams.
    private func seed(_ client: DatabasePool) async throws -> PostgresEventStore {
        let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
        for user in Self.users {
            for index in 0..<3 {
                _ = try await store.append([try .purchase("\(user)-\(index)")], to: try Self.stream(user), expecting: .any)
            }
        }
        return store
    }

    /// What a determined administrator (the owner; the server's role cannot) could do: switch the triggers off and edit rows.
    private func tamper(_ client: DatabasePool, _ statement: PostgresQuery) async throws {
        try await TestDatabase.withOwnerConnection(of: client) { connection in
            try await connection.query("GRANT UPDATE, DELETE ON ledger.events TO CURRENT_USER", logger: TestDatabase.logger)
            try await connection.query("ALTER TABLE ledger.events DISABLE TRIGGER USER", logger: TestDatabase.logger)
            try await connection.query(statement, logger: TestDatabase.logger)
            try await connection.query("ALTER TABLE ledger.events ENABLE TRIGGER USER", logger: TestDatabase.logger)
        }
    }

    /// Rewrites a stream's events from `version` on and recomputes every hash from there: the
    /// chain stays whole, so only an anchor can tell.
    private func rewriteAndRehash(_ client: DatabasePool, stream: StreamID, from version: Int64) async throws {
        try await tamper(client, """
            UPDATE ledger.events SET data = jsonb_set(data, '{quantity}', '100')
            WHERE stream_id = \(stream.rawValue) AND stream_version >= \(version)
            """)
        let rows = try await client.query(
            "SELECT \"position\", stream_version FROM ledger.events WHERE stream_id = \(stream.rawValue) AND stream_version >= \(version) ORDER BY stream_version",
            logger: TestDatabase.logger
        ).collect()
        for row in rows {
            let (position, _) = try row.decode((Int64, Int64).self)
            try await tamper(client, """
                UPDATE ledger.events e SET hash = sha256(
                    coalesce((SELECT p.hash FROM ledger.events p WHERE p.stream_id = e.stream_id AND p.stream_version = e.stream_version - 1), '\\x'::bytea)
                    || ledger.event_content(e.position, e.stream_id, e.stream_version, e.event_id, e.event_type, e.data, e.metadata, e.recorded_at, e.dedup_key))
                WHERE e."position" = \(position)
                """)
        }
    }

    /// Anchors the log with a new key into `directory` and reads the anchor back, trusting that key.
    private func anchor(_ client: DatabasePool, in directory: URL) async throws -> (LogAnchor, LogAnchorSummary, path: String) {
        let keyPath = directory.appendingPathComponent("anchor.key").path
        let key = try AnchorSigningKey.create(at: keyPath)
        let path = directory.appendingPathComponent("anchor.json").path
        let summary = try await LogAnchorBuilder(client: client, logger: TestDatabase.logger).write(toNewFile: path, signingWith: key)
        let loaded = try LogAnchor.load(from: path, trusting: try AnchorPublicKey.load(from: keyPath + ".pub"))
        return (loaded, summary, path)
    }

    private func verify(_ client: DatabasePool, against anchor: LogAnchor) async throws -> (HashChainVerifier.Report, LogAnchorReport) {
        let report = try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify(against: anchor)
        return (report, try #require(report.anchor))
    }

    @Test("an intact log verifies against its anchor, with events and streams appended since")
    func intactWithLaterAppends() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            try await withDirectory { directory in
                let (anchor, summary, path) = try await anchor(client, in: directory)
                #expect(summary.streamCount == 5 && summary.eventCount == 15 && summary.logHeadPosition >= 15)
                #expect(anchor.trust == .trustedKey && anchor.summary == summary)
                #expect(anchor.heads.map(\.streamID) == Self.users.map { "user/app/\($0)" }.sorted(by: StreamHead.precedes))
                #expect(anchor.heads.allSatisfy { $0.version == 3 })
                let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
                #expect(mode == 0o640, "it lists user ids: owner and group only")

                _ = try await store.append([try .purchase("alice-later")], to: try Self.stream("alice"), expecting: .exactly(3))
                _ = try await store.append([try .purchase("dave-0"), try .purchase("dave-1")], to: try Self.stream("dave"), expecting: .noStream)
                let (report, compared) = try await verify(client, against: anchor)
                #expect(report.isIntact)
                #expect(compared.isIntact && compared.findings.isEmpty)
                #expect(compared.streamsMatched == 5)
                #expect(compared.eventsAtOrBelowAnchoredHead == 15)
                #expect(report.eventsChecked == 18)
            }
        }
    }

    @Test("an append still running while the anchor is taken, with a lower position than one committed, is not mistaken for an insertion")
    func appendInFlight() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = try await seed(client)
            try await withDirectory { directory in
                try await TestDatabase.withConnection(settings) { slow in
                    let slowPosition = try await TestDatabase.beginAppend(on: slow, stream: "user/app/slow", data: #"{"slow":true}"#)
                    let fast = try await store.append([try .purchase("fast")], to: try Self.stream("alice"), expecting: .exactly(3))
                    #expect(fast.position > slowPosition)

                    let (anchor, summary, _) = try await anchor(client, in: directory)
                    #expect(summary.logHeadPosition < slowPosition, "the anchor stops before the running append")
                    #expect(summary.eventCount == 15)
                    #expect(anchor.heads.first { $0.streamID == "user/app/alice" }?.version == 3, "alice's 4th event came after the running append")

                    try await slow.query("COMMIT", logger: TestDatabase.logger)
                    let (report, compared) = try await verify(client, against: anchor)
                    #expect(report.isIntact && compared.isIntact, "\(compared.findings) \(compared.eventCountFinding ?? "")")
                }
            }
        }
    }

    @Test("an empty log anchors, and everything appended since verifies against it")
    func emptyLog() async throws {
        try await TestDatabase.withDatabase { client, _ in
            try await withDirectory { directory in
                let (anchor, summary, _) = try await anchor(client, in: directory)
                #expect(summary.streamCount == 0 && summary.eventCount == 0 && summary.logHeadPosition == 0)
                #expect(anchor.heads.isEmpty)
                _ = try await seed(client)
                let (report, compared) = try await verify(client, against: anchor)
                #expect(report.isIntact && compared.isIntact && report.eventsChecked == 15)
            }
        }
    }

    @Test("a stream's last events removed are found as a truncation, and a different event put in their place as a rewrite")
    func truncation() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            try await withDirectory { directory in
                let (anchor, _, _) = try await anchor(client, in: directory)
                let alice = try Self.stream("alice")
                try await tamper(client, "DELETE FROM ledger.events WHERE stream_id = \(alice.rawValue) AND stream_version >= 2")

                let (report, compared) = try await verify(client, against: anchor)
                #expect(report.breaks.isEmpty, "the chains alone see nothing")
                #expect(!report.isIntact)
                #expect(compared.findings.count == 1)
                let finding = try #require(compared.findings.first)
                #expect(finding.streamID == alice.rawValue)
                #expect(finding.kind == .truncated(currentVersion: 1))
                #expect(finding.description.contains("TRUNCATED") && finding.description.contains("2 events removed"), "\(finding)")
                #expect(compared.eventsAtOrBelowAnchoredHead == 13)
                #expect(compared.eventCountFinding?.contains("2 of the 15 events") == true, "\(compared.eventCountFinding ?? "")")

                // Two new events take versions 2 and 3 again: the chain is whole, the anchored head is not.
                _ = try await store.append([try .purchase("alice-forged-1"), try .purchase("alice-forged-2")], to: alice, expecting: .exactly(1))
                let (again, comparedAgain) = try await verify(client, against: anchor)
                #expect(again.breaks.isEmpty)
                guard case .rewritten = try #require(comparedAgain.findings.first).kind else {
                    Issue.record("expected a rewrite, got \(comparedAgain.findings)")
                    return
                }
                #expect(comparedAgain.findings.map(\.streamID) == [alice.rawValue])
            }
        }
    }

    @Test("a stream removed whole is found as deleted, and its twin spelling is left alone")
    func deletedStream() async throws {
        try await TestDatabase.withDatabase { client, _ in
            _ = try await seed(client)
            try await withDirectory { directory in
                let (anchor, _, _) = try await anchor(client, in: directory)
                let bob = try Self.stream("bob")
                let decomposed = try Self.stream("cafe\u{301}")
                try await tamper(client, "DELETE FROM ledger.events WHERE stream_id IN (\(bob.rawValue), \(decomposed.rawValue))")

                let (report, compared) = try await verify(client, against: anchor)
                #expect(report.breaks.isEmpty, "the chains alone see nothing")
                #expect(Set(compared.findings.map(\.streamID)) == [bob.rawValue, decomposed.rawValue])
                #expect(compared.findings.allSatisfy { $0.kind == .deleted })
                #expect(compared.findings.allSatisfy { $0.description.contains("DELETED") })
                #expect(compared.streamsMatched == 3, "the precomposed café is still there")
                #expect(compared.eventsAtOrBelowAnchoredHead == 9)
            }
        }
    }

    @Test("a suffix rewritten with its hashes recomputed is found at the anchored version")
    func rewrittenSuffix() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = try await seed(client)
            try await withDirectory { directory in
                let (anchor, _, _) = try await anchor(client, in: directory)
                let carol = try Self.stream("carol")
                let head = try await store.readStream(carol, fromVersion: 3, limit: 1)[0]
                try await rewriteAndRehash(client, stream: carol, from: 2)

                let (report, compared) = try await verify(client, against: anchor)
                #expect(report.breaks.isEmpty, "the chains alone see nothing")
                #expect(compared.eventsAtOrBelowAnchoredHead == 15, "nothing was removed")
                let finding = try #require(compared.findings.first)
                #expect(compared.findings.count == 1)
                #expect(finding.streamID == carol.rawValue && finding.anchored.version == 3)
                guard case .rewritten(let position, let hash) = finding.kind else {
                    Issue.record("expected a rewrite, got \(finding)")
                    return
                }
                #expect(position == head.position)
                #expect(hash != finding.anchored.hash)
                #expect(finding.description.contains("REWRITTEN") && finding.description.contains("position \(head.position)"))
            }
        }
    }

    @Test("an anchor changed after signing, or signed by another key, is refused before anything is compared")
    func tamperedAnchorFile() async throws {
        try await TestDatabase.withDatabase { client, _ in
            _ = try await seed(client)
            try await withDirectory { directory in
                let (anchor, _, path) = try await anchor(client, in: directory)
                let keyFile = directory.appendingPathComponent("anchor.key.pub").path
                let trusted = try AnchorPublicKey.load(from: keyFile)
                let text = try String(contentsOfFile: path, encoding: .utf8)

                func refusal(_ edited: String, trusting key: AnchorPublicKey? = trusted) throws -> LogAnchorError {
                    let copy = directory.appendingPathComponent("edited-\(UUID().uuidString).json")
                    try edited.write(to: copy, atomically: true, encoding: .utf8)
                    return try #require(throws: LogAnchorError.self) { try LogAnchor.load(from: copy.path, trusting: key) }
                }

                // A head moved back to an earlier version, as someone hiding a truncation would.
                let bobHead = "\"stream\": \"user/app/bob\", \"version\": 3"
                #expect(text.contains(bobHead))
                let changedHead = try refusal(text.replacingOccurrences(of: bobHead, with: "\"stream\": \"user/app/bob\", \"version\": 2"))
                #expect(changedHead.code == .tamperedAnchor && changedHead.message.contains("Merkle root"), "\(changedHead)")

                // A signed field changed.
                let position = "\"logHeadPosition\": \(anchor.summary.logHeadPosition)"
                let changedSummary = try refusal(text.replacingOccurrences(of: position, with: "\"logHeadPosition\": \(anchor.summary.logHeadPosition + 1)"))
                #expect(changedSummary.code == .tamperedAnchor && changedSummary.message.contains("signature"), "\(changedSummary)")

                // A stream dropped from the list, with the count to match.
                let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
                let dropped = lines.filter { !$0.contains("user/app/alice") }
                    .joined(separator: "\n").replacingOccurrences(of: "\"streamCount\": 5", with: "\"streamCount\": 4")
                #expect(try refusal(dropped).code == .tamperedAnchor)

                // The whole anchor made again with another key: intact, but not ours.
                let otherKey = try AnchorSigningKey.create(at: directory.appendingPathComponent("other.key").path)
                let forged = directory.appendingPathComponent("forged.json").path
                _ = try await LogAnchorBuilder(client: client, logger: TestDatabase.logger).write(toNewFile: forged, signingWith: otherKey)
                let wrongKey = try #require(throws: LogAnchorError.self) { try LogAnchor.load(from: forged, trusting: trusted) }
                #expect(wrongKey.code == .untrustedKey && wrongKey.message.contains(otherKey.publicKey.fingerprint))
                #expect(try LogAnchor.load(from: forged, trusting: nil).trust == .embeddedKeyOnly, "without a trusted key only the embedded one is checked, and said so")

                // Cut short, as a copy interrupted would be.
                #expect(try refusal(String(text.prefix(text.count / 2))).code == .malformedAnchor)
            }
        }
    }

    @Test("an anchor is never written over an existing file, and a failed one leaves nothing behind")
    func anchorFileSafety() async throws {
        try await TestDatabase.withDatabase { client, _ in
            _ = try await seed(client)
            try await withDirectory { directory in
                let key = try AnchorSigningKey.create(at: directory.appendingPathComponent("anchor.key").path)
                let builder = LogAnchorBuilder(client: client, logger: TestDatabase.logger)
                let path = directory.appendingPathComponent("anchor.json").path
                try Data("kept".utf8).write(to: URL(fileURLWithPath: path))
                let refused = try await #require(throws: LogAnchorError.self) { try await builder.write(toNewFile: path, signingWith: key) }
                #expect(refused.message.contains("already exists"))
                #expect(try String(contentsOfFile: path, encoding: .utf8) == "kept")

                // The log unreadable midway: no half anchor is left.
                try await TestDatabase.withOwnerConnection(of: client) { try await $0.query("ALTER TABLE ledger.events RENAME TO events_elsewhere", logger: TestDatabase.logger) }
                let failed = directory.appendingPathComponent("failed.json").path
                await #expect(throws: (any Error).self) { try await builder.write(toNewFile: failed, signingWith: key) }
                #expect(!FileManager.default.fileExists(atPath: failed))
                try await TestDatabase.withOwnerConnection(of: client) { try await $0.query("ALTER TABLE ledger.events_elsewhere RENAME TO events", logger: TestDatabase.logger) }
            }
        }
    }

    private func withDirectory(_ body: (URL) async throws -> Void) async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-anchor-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try await body(directory)
    }
}
