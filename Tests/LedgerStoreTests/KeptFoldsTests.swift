import Foundation
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import LedgerTesting
import Testing

@Suite("A command starts from the fold kept of its stream and reads only what was appended since")
struct KeptFoldsTests {
    static let app = "com.example.app"
    static let logger = TestDatabase.logger

    static func handler(_ client: DatabasePool, kept: KeptFolds?) -> UserCommandHandler {
        UserCommandHandler(store: PostgresEventStore(client: client, logger: logger), logger: logger, kept: kept)
    }

    @Test("two servers' handlers take turns on one user: each decides on the state a fold from the start gives, reading each event once")
    func twoHandlersTakingTurns() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let (first, second) = (KeptFolds(), KeptFolds())
            let handlers = [Self.handler(client, kept: first), Self.handler(client, kept: second)]
            let unkept = UserStreamReader(store: PostgresEventStore(client: client, logger: Self.logger))
            try await handlers[0].defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: Self.app)
            var positions: [Int64] = []
            var bought = 0
            for round in 0..<40 {
                let handler = handlers[round % 2]
                // A receipt naming every purchase so far (as Apple's do), then a use of one coin.
                let receipt = (0...round).map {
                    TestTransaction("t\($0)", "coins", quantity: 2, purchased: Date(timeIntervalSince1970: 1_767_225_600 + Double($0) * 60))
                }
                let posted = try await handler.execute(app: Self.app, user: "u1") { state, _ in
                    (try TestReceipts.observe(receipt, app: Self.app, on: state).events, ())
                }
                bought += 2
                let used = try await handler.execute(app: Self.app, user: "u1") { state, catalog in
                    (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
                }
                #expect(used.state.balance(of: "coins") == bought - (round + 1), "round \(round)")
                positions.append(try #require(posted.append?.position))
                let catalog = try await unkept.catalog(app: Self.app)
                let fromStart = try await unkept.state(of: .user(app: Self.app, user: "u1"), catalog: catalog)
                #expect(try await handler.reader.state(of: .user(app: Self.app, user: "u1"), catalog: catalog) == fromStart, "round \(round)")
            }
            let events = try await PostgresEventStore(client: client, logger: Self.logger).readStream(.user(app: Self.app, user: "u1"), fromVersion: 1, limit: 1_000).count
            for kept in [first, second] {
                // Each handler read the other's events once, and its own once, when it next read the stream.
                #expect(kept.counts.eventsRead <= events, "\(kept.counts.eventsRead) events read in \(kept.counts.reads) reads of a stream of \(events)")
            }
            // The past is still answered, from the start of the log: the kept fold is further along.
            let catalog = try await unkept.catalog(app: Self.app)
            for position in [positions[3], positions[17]] {
                let past = try await handlers[0].reader.state(of: .user(app: Self.app, user: "u1"), upToPosition: position, catalog: catalog)
                #expect(past == (try await unkept.state(of: .user(app: Self.app, user: "u1"), upToPosition: position, catalog: catalog)))
            }
        }
    }

    @Test("a projection batch's own events move a kept fold on without reading the stream, only when they follow it exactly")
    func batchEventsMoveTheFoldOn() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: Self.logger)
            let handler = Self.handler(client, kept: nil)
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: Self.app)
            for round in 0..<6 {
                let receipt = (0...round).map {
                    TestTransaction("t\($0)", "coins", quantity: 2, purchased: Date(timeIntervalSince1970: 1_767_225_600 + Double($0) * 60))
                }
                _ = try await handler.execute(app: Self.app, user: "u1") { state, _ in
                    (try TestReceipts.observe(receipt, app: Self.app, on: state).events, ())
                }
            }
            let stream = try StreamID.user(app: Self.app, user: "u1")
            let events = try await store.readStream(stream, fromVersion: 1, limit: 1_000)
            #expect(events.count >= 12)
            let unkept = UserStreamReader(store: store)
            let catalog = try await unkept.catalog(app: Self.app)
            func fromStart(_ position: Int64) async throws -> UserLedger {
                try await unkept.state(of: stream, upToPosition: position, catalog: catalog)
            }

            // Kept up to the fourth event; the next three, as a batch ending at the seventh, follow it.
            let kept = KeptFolds()
            let reader = UserStreamReader(store: store, kept: kept)
            _ = try await reader.state(of: stream, upToPosition: events[3].position, catalog: catalog)
            let read = kept.counts.eventsRead
            let moved = try await reader.state(of: stream, upToPosition: events[6].position, catalog: catalog, tail: .init(batch: Array(events[4...6])))
            #expect(moved == (try await fromStart(events[6].position)))
            #expect(kept.counts.eventsRead == read, "the batch's events were folded as given")
            // An empty tail right after the kept fold: nothing more up to there, nothing read.
            let same = try await reader.state(of: stream, upToPosition: events[7].position - 1, catalog: catalog,
                                              tail: .init(afterVersion: events[6].streamVersion, events: []))
            #expect(same == moved && kept.counts.eventsRead == read)

            // A batch that skips a version (the kept fold is behind it) is not trusted: the stream is read.
            let skipping = try await reader.state(of: stream, upToPosition: events[9].position, catalog: catalog, tail: .init(batch: Array(events[8...9])))
            #expect(skipping == (try await fromStart(events[9].position)))
            #expect(kept.counts.eventsRead > read, "the stream was read from the kept fold on")

            // Nor one reaching past the position asked for, nor one out of order.
            let past = kept.counts.eventsRead
            let beyond = try await reader.state(of: stream, upToPosition: events[10].position, catalog: catalog, tail: .init(batch: Array(events[10...11])))
            #expect(beyond == (try await fromStart(events[10].position)) && kept.counts.eventsRead > past)
            let shuffled = Array(events[11...]).reversed()
            let last = try #require(events.last?.position)
            let ordered = try await reader.state(of: stream, upToPosition: last, catalog: catalog, tail: .init(afterVersion: events[10].streamVersion, events: Array(shuffled)))
            #expect(ordered == (try await fromStart(last)))
        }
    }

    @Test("a catalog change reaches a handler whose catalog is kept, and judges its kept users' transactions anew")
    func catalogChangesReachKeptFolds() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = Self.handler(client, kept: KeptFolds())
            let other = Self.handler(client, kept: KeptFolds())
            let gems = TestTransaction("g1", "gems", quantity: 3, purchased: Date(timeIntervalSince1970: 1_767_225_600))
            _ = try await handler.execute(app: Self.app, user: "u1") { state, _ in
                (try TestReceipts.observe([gems], app: Self.app, on: state).events, ())
            }
            #expect(try await handler.reader.catalog(app: Self.app).type(of: "gems") == .unknown)
            // Another server defines the product: this handler's kept catalog is one version behind.
            try await other.defineProduct(try Product(productId: "gems", type: .consumable), app: Self.app)
            let catalog = try await handler.reader.catalog(app: Self.app)
            #expect(catalog.type(of: "gems") == .consumable)
            let state = try await handler.reader.state(of: .user(app: Self.app, user: "u1"), catalog: catalog)
            #expect(state.balance(of: "gems") == 3, "the purchase recorded before the definition is judged with it")
        }
    }

    @Test("past capacity the least recently used folds are forgotten, and a forgotten stream folds from its start again")
    func boundedByCapacity() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let kept = KeptFolds(capacity: 10)
            let handler = Self.handler(client, kept: kept)
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable), app: Self.app)
            for user in 0..<30 {
                _ = try await handler.execute(app: Self.app, user: "u\(user)") { state, _ in
                    (try TestReceipts.observe([TestTransaction("t\(user)", "coins", quantity: 1)], app: Self.app, on: state).events, ())
                }
            }
            #expect(kept.keptUsers <= 10)
            // Bounded by the events the folds hold, too: long streams take more memory.
            let small = KeptFolds(capacity: 1_000, eventCapacity: 12)
            let reader = UserStreamReader(store: PostgresEventStore(client: client, logger: Self.logger), kept: small)
            let known = try await reader.catalog(app: Self.app)
            for user in 0..<30 {
                #expect(try await reader.state(of: .user(app: Self.app, user: "u\(user)"), catalog: known).balance(of: "coins") == 1)
                #expect(small.keptEvents <= 12, "\(small.keptEvents) events kept after u\(user)")
            }
            #expect(small.keptUsers >= 1)
            let catalog = try await handler.reader.catalog(app: Self.app)
            let before = kept.counts.eventsRead
            let state = try await handler.reader.state(of: .user(app: Self.app, user: "u0"), catalog: catalog)
            #expect(state.balance(of: "coins") == 1)
            #expect(kept.counts.eventsRead > before, "u0 was forgotten and read again")
        }
    }
}
