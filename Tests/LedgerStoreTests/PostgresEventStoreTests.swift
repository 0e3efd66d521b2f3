import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

@Suite("Appending to the event log")
struct PostgresEventStoreTests {
    @Test("events appended to a stream are read back in order with versions 1, 2, 3")
    func appendAndRead() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID.user(app: "com.example.app", user: "u1")
            let first = try await store.append([try .purchase("1")], to: stream, expecting: .noStream)
            let second = try await store.append([try .purchase("2"), try .purchase("3")], to: stream, expecting: .exactly(1))
            #expect(first.outcomes == [.appended(position: first.position, streamVersion: 1)])
            #expect(second.appendedCount == 2)

            let events = try await store.readStream(stream, fromVersion: 1, limit: 100)
            #expect(events.map(\.streamVersion) == [1, 2, 3])
            #expect(events.map(\.position) == events.map(\.position).sorted())
            #expect(events.last?.position == second.position)
            #expect(events[1].deduplicationKey == "appstore/com.example.app/sandbox/payment/2")
            #expect(events[0].type == "PurchaseRecorded.v1")
            #expect(events[0].data.contains(#""transactionId": "1""#))
            #expect(try await store.currentVersion(of: stream) == 3)
            // An append says when its events were recorded, exactly as the log reads it back.
            #expect(first.recordedAt == events[0].recordedAt)
            #expect(second.recordedAt == events[1].recordedAt && second.recordedAt == events[2].recordedAt)
            let again = try await store.append([try .purchase("3")], to: stream, expecting: .any)
            #expect(again.isDuplicate && again.recordedAt == nil, "nothing appended, no instant")
        }
    }

    @Test("streams read with keys looked up in one statement give what the two reads give apart, planned per call or prepared",
          arguments: [false, true])
    func readStreamsLookingUpKeys(prepared: Bool) async throws {
        try await TestDatabase.withDatabase { client, _ in
            // A log this small is read by statements planned per call, unless told otherwise.
            if prepared { client.logReach.prepare(from: 0) }
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let alice = try StreamID.user(app: "com.example.app", user: "alice")
            let bob = try StreamID.user(app: "com.example.app", user: "bob")
            _ = try await store.append([try .purchase("1"), try .purchase("2"), try .purchase("3")], to: alice, expecting: .noStream)
            _ = try await store.append([try .purchase("4")], to: bob, expecting: .noStream)
            let keys = try ["appstore/com.example.app/sandbox/payment/2", "appstore/com.example.app/sandbox/payment/4",
                            "appstore/com.example.app/sandbox/payment/9"].map(DeduplicationKey.init(rawValue:))
            let streams = [(stream: alice, afterVersion: Int64(1)), (stream: bob, afterVersion: Int64(0))]
            let (events, found) = try await store.readStreams(streams, upToPosition: .max, lookingUp: keys)
            let apart = try await store.readStreams(streams, upToPosition: .max)
            #expect(events.mapValues { $0.map(\.eventID) } == apart.mapValues { $0.map(\.eventID) })
            #expect(events[alice.rawValue]?.map(\.streamVersion) == [2, 3])
            #expect(events[alice.rawValue]?.first?.data == apart[alice.rawValue]?.first?.data)
            #expect(found == (try await store.recorded(keys)))
            #expect(Set(found.keys.map(\.rawValue)) == ["appstore/com.example.app/sandbox/payment/2", "appstore/com.example.app/sandbox/payment/4"])
            #expect(found[keys[1]]?.streamID == bob.rawValue)
            // None of the keys recorded, or no key asked: the streams alone.
            let none = try await store.readStreams(streams, upToPosition: .max, lookingUp: [keys[2]])
            #expect(none.recorded.isEmpty && none.events.mapValues(\.count) == apart.mapValues(\.count))
            // Up to a position, and more keys than the largest prepared bucket holds (read unprepared).
            let early = try await store.readStreams(streams, upToPosition: found[keys[0]]!.position, lookingUp: keys)
            #expect(early.events[alice.rawValue]?.map(\.streamVersion) == [2] && early.events[bob.rawValue] == nil)
            let many = keys + (0..<40).map { try! DeduplicationKey(rawValue: "appstore/com.example.app/sandbox/payment/x\($0)") }
            #expect(try await store.readStreams(streams, upToPosition: .max, lookingUp: many).recorded == found)
            #expect((client.preparedStatements.count > 0) == prepared)
        }
    }

    @Test("a wrong expected version is a conflict naming the stream, the expected and the actual version")
    func wrongExpectedVersion() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/conflict")
            _ = try await store.append([try .purchase("a", deduplicate: false)], to: stream, expecting: .noStream)

            for expected in [ExpectedVersion.noStream, .exactly(5)] {
                let error = try await #require(throws: StoreError.self) {
                    try await store.append([try .purchase("b", deduplicate: false)], to: stream, expecting: expected)
                }
                #expect(error.code == .wrongExpectedVersion)
                #expect(error.conflict == .init(streamID: "user/app/conflict", expected: expected.description, actual: 1))
                #expect(error.message.contains("user/app/conflict"))
            }
            #expect(try await store.currentVersion(of: stream) == 1, "a refused append records nothing")
        }
    }

    @Test("several events in one append are all recorded or none is")
    func atomicBatch() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/atomic")
            let good = try NewEvent.purchase("ok-1")
            let clash = try NewEvent.purchase("ok-2")
            _ = try await store.append([clash], to: try StreamID("user/app/other"), expecting: .any)
            // An event id already in the log makes the whole batch fail.
            let reused = try NewEvent(eventID: clash.eventID, type: clash.type, data: "{}")
            await #expect(throws: StoreError.self) {
                try await store.append([good, reused], to: stream, expecting: .noStream)
            }
            #expect(try await store.readStream(stream, fromVersion: 1, limit: 10).isEmpty)
        }
    }

    @Test("64 concurrent appends of one transaction store one event; all learn its position, 63 hear duplicate")
    func concurrentDuplicates() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID.user(app: "com.example.app", user: "dup")
            let results = try await withThrowingTaskGroup(of: AppendResult.self) { group in
                for _ in 0..<64 {
                    group.addTask {
                        try await store.append([try .purchase("1000000099")], to: stream, expecting: .any)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let events = try await store.readStream(stream, fromVersion: 1, limit: 100)
            #expect(events.count == 1)
            let stored = try #require(events.first)
            #expect(results.filter(\.isDuplicate).count == 63)
            #expect(results.filter { !$0.isDuplicate }.count == 1)
            #expect(Set(results.map(\.position)) == [stored.position])
            for case .duplicate(let reference) in results.flatMap(\.outcomes) {
                #expect(reference.eventID == stored.eventID)
                #expect(reference.streamVersion == 1)
            }
        }
    }

    @Test("a retried command whose events are recorded is a duplicate, not a version conflict")
    func retryIsDuplicate() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/retry")
            let first = try await store.append([try .purchase("t1"), try .purchase("t2")], to: stream, expecting: .noStream)
            let retry = try await store.append([try .purchase("t1"), try .purchase("t2")], to: stream, expecting: .noStream)
            #expect(retry.isDuplicate)
            #expect(retry.position == first.position)

            // Part new, part known: only the new one is appended, after the known ones.
            let mixed = try await store.append([try .purchase("t2"), try .purchase("t3")], to: stream, expecting: .exactly(2))
            guard case .duplicate = mixed.outcomes[0], case .appended(_, let version) = mixed.outcomes[1] else {
                Issue.record("expected a duplicate then an append, got \(mixed.outcomes)")
                return
            }
            #expect(version == 3)
            #expect(try await store.currentVersion(of: stream) == 3)
        }
    }

    @Test("an append to another stream carrying a recorded key is refused whole, naming where the key is (LW007)")
    func duplicateAcrossStreams() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let owner = try StreamID("user/app/owner")
            let other = try StreamID("user/app/someone-else")
            let first = try await store.append([try .purchase("shared")], to: owner, expecting: .any)
            // Fast path (unique violation) then the checking path; with a new event besides, which must not land.
            let error = try await #require(throws: StoreError.self) {
                try await store.append([try .purchase("fresh"), try .purchase("shared")], to: other, expecting: .any)
            }
            #expect(error.code == .keyHeldByAnotherStream)
            let key = try DeduplicationKey.appStoreTransaction(app: "com.example.app", environment: .sandbox, kind: .payment, transactionID: "shared")
            #expect(error.heldElsewhere[key]?.streamID == owner.rawValue)
            #expect(error.heldElsewhere[key]?.position == first.position)
            #expect(error.heldElsewhere.count == 1)
            #expect(try await store.readStream(other, fromVersion: 1, limit: 10).isEmpty)
            // The owner's own retry is still a duplicate.
            let retried = try await store.append([try .purchase("shared")], to: owner, expecting: .any)
            #expect(retried.isDuplicate)
        }
    }

    @Test("under contention each version is won by exactly one writer; losers get conflicts; no gaps")
    func expectedVersionContention() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/contended")
            // 16 writers race 10 rounds each, always appending at the version they last read.
            let outcomes = try await withThrowingTaskGroup(of: (wins: Int, conflicts: Int).self) { group in
                for _ in 0..<16 {
                    group.addTask {
                        var wins = 0
                        var conflicts = 0
                        for _ in 0..<10 {
                            let version = try await store.currentVersion(of: stream)
                            do {
                                _ = try await store.append([try .purchase(UUID().uuidString, deduplicate: false)], to: stream, expecting: .exactly(version))
                                wins += 1
                            } catch let error as StoreError where error.code == .wrongExpectedVersion {
                                conflicts += 1
                                #expect(error.conflict?.actual ?? 0 > version)
                            }
                        }
                        return (wins, conflicts)
                    }
                }
                return try await group.reduce(into: [(wins: Int, conflicts: Int)]()) { $0.append($1) }
            }
            let wins = outcomes.map(\.wins).reduce(0, +)
            let conflicts = outcomes.map(\.conflicts).reduce(0, +)
            #expect(wins + conflicts == 160)
            #expect(conflicts > 0, "16 writers on one stream must collide")
            let events = try await store.readStream(stream, fromVersion: 1, limit: 1_000)
            #expect(events.map(\.streamVersion) == Array(1...Int64(wins)))
        }
    }

    @Test("appends with `any` on a shared stream all land, each at its own version")
    func anyVersionUnderContention() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/any")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<16 {
                    group.addTask {
                        for round in 0..<5 {
                            _ = try await store.append([try .purchase("\(writer)-\(round)")], to: stream, expecting: .any)
                        }
                    }
                }
                try await group.waitForAll()
            }
            let events = try await store.readStream(stream, fromVersion: 1, limit: 1_000)
            #expect(events.map(\.streamVersion) == Array(1...80))
        }
    }

    @Test("bad input is refused with a message and records nothing")
    func badInput() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let stream = try StreamID("user/app/bad")
            let empty = try await #require(throws: StoreError.self) { try await store.append([], to: stream, expecting: .any) }
            #expect(empty.code == .invalidInput)
            let twice = try await #require(throws: StoreError.self) {
                try await store.append([try .purchase("same"), try .purchase("same")], to: stream, expecting: .any)
            }
            #expect(twice.message.contains("appears twice"))
            #expect(try await store.readStream(stream, fromVersion: 1, limit: 10).isEmpty)
        }
    }

    @Test("ledger.append refuses to run after another write in the same transaction")
    func appendMustComeFirst() async throws {
        try await TestDatabase.withDatabase { _, settings in
            try await TestDatabase.withConnection(settings) { connection in
                try await connection.query("BEGIN", logger: TestDatabase.logger)
                try await connection.query("CREATE TEMP TABLE scratch (x int)", logger: TestDatabase.logger)
                try await connection.query("INSERT INTO scratch VALUES (1)", logger: TestDatabase.logger)
                let error = try await #require(throws: PSQLError.self) {
                    try await connection.query(
                        "SELECT * FROM ledger.append('s', NULL, ARRAY[gen_random_uuid()], ARRAY['A.v1'], ARRAY['{}'], ARRAY['{}'], ARRAY[NULL::text])",
                        logger: TestDatabase.logger
                    ).collect()
                }
                #expect(error.serverInfo?[.sqlState] == "LW002")
                try await connection.query("ROLLBACK", logger: TestDatabase.logger)
            }
        }
    }
}

@Suite("The hottest lookups are prepared once the log is large enough, as this process has seen it")
struct LogReachTests {
    @Test("the highest position seen decides, whatever order positions come in")
    func highestSeen() {
        let reach = LogReach(preparedFrom: 10)
        #expect(!reach.prepares)
        reach.saw(9)
        reach.saw(4)
        #expect(!reach.prepares)
        reach.saw(10)
        #expect(reach.prepares)
        reach.saw(3)
        #expect(reach.prepares, "a lower position later changes nothing")
        reach.prepare(from: 11)
        #expect(!reach.prepares)
    }
}
