import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
import Synchronization
import Testing

/// The fetches of unseen purchases' histories, out of the posts' way: queued, one at a time, not
/// twice, held back when Apple says so, bounded.
@Suite("Fetching unseen purchases' histories after the posts")
struct OriginBackfillsTests {
    static let app = RecordAppStoreFactsTests.app

    /// Apple's history of purchase "p1" (a restore's origin), answering as `answer` says, counting calls.
    final class CountingHistory: TransactionHistorySource, Sendable {
        let calls = Atomic<Int>(0)
        let answer: @Sendable (Int) throws -> [HistoryTransaction]

        init(answer: @escaping @Sendable (Int) throws -> [HistoryTransaction]) {
            self.answer = answer
        }

        func history(of transactionId: String, app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> [HistoryTransaction] {
            let call = calls.add(1, ordering: .relaxed).newValue
            return try answer(call)
        }

        static let purchase = HistoryTransaction(
            fields: ["transactionId": "p1", "originalTransactionId": "p1", "productId": "levels", "quantity": "1", "purchaseDate": "1704067200000",
                     "type": "Non-Consumable", "inAppOwnershipType": "PURCHASED", "environment": "Production"],
            signedDate: TestTransaction.defaultDate
        )
    }

    static func ledger(_ history: CountingHistory) async throws -> InMemoryLedger {
        let ledger = InMemoryLedger(history: history, logger: quietLogger)
        ledger.directory.addApp(app, serverAPIKey: ServerAPIKey(keyID: "K", issuerID: "I", privateKeyPEM: "pem"))
        _ = try await ledger.commands.defineProduct(try Product(productId: "levels", type: .nonConsumable, prices: ["USD": "2.99"]), app: app,
                                                    metadata: [:])
        return ledger
    }

    /// A restore of p1 on a new device: its origin is unknown to the stream.
    static func restore(_ ledger: InMemoryLedger, id: String = "r1", user: String = "u1") async throws -> RecordAppStoreFacts.Recording {
        try await RecordAppStoreFactsTests.post(ledger, user, [TestTransaction(id, "levels", original: "p1")], named: "restore \(id)")
    }

    static func eventually(_ condition: () async throws -> Bool) async throws -> Bool {
        for _ in 0..<200 {
            if try await condition() { return true }
            try await Task.sleep(for: .milliseconds(10))
        }
        return false
    }

    @Test("the post answers at once; the worker then records Apple's history for the user, once")
    func fetchedAfterThePost() async throws {
        let history = CountingHistory { _ in [CountingHistory.purchase] }
        let ledger = try await Self.ledger(history)
        let queue = try #require(ledger.origins)
        let posted = try await Self.restore(ledger)
        #expect(posted.recorded.map(\.kind).contains("restore") && !posted.recorded.contains { $0.transactionId == "p1" })
        let waiting = await queue.count
        #expect(waiting == 1 && history.calls.load(ordering: .relaxed) == 0, "nothing asked of Apple during the post")
        let worker = Task { await queue.run() }
        defer { worker.cancel() }
        #expect(try await Self.eventually { await queue.finished == 1 })
        let state = try await ledger.handler.reader.state(app: Self.app, user: "u1")
        #expect(state.transactions["p1"]?.kind == .purchase)
        // Another restore of the same purchase on a third device: known now, nothing fetched.
        _ = try await Self.restore(ledger, id: "r2")
        let left = await queue.count
        #expect(left == 0 && history.calls.load(ordering: .relaxed) == 1)
    }

    @Test("a purchase Apple's history lacks is not asked for again with every post of its renewals")
    func notFetchedAgainSoon() async throws {
        let history = CountingHistory { _ in throw TransactionHistoryError.transactionNotFound("p1") }
        let ledger = try await Self.ledger(history)
        let queue = try #require(ledger.origins)
        let worker = Task { await queue.run() }
        defer { worker.cancel() }
        for index in 1...5 {
            _ = try await Self.restore(ledger, id: "r\(index)")
            #expect(try await Self.eventually { await queue.count == 0 })
        }
        #expect(try await Self.eventually { await queue.finished == 1 })
        #expect(history.calls.load(ordering: .relaxed) == 1, "one fetch, not five: \(history.calls.load(ordering: .relaxed))")
    }

    @Test("when Apple says to slow down the job waits for the time it named, then runs")
    func heldBackByA429() async throws {
        let history = CountingHistory { call in
            if call == 1 { throw TransactionHistoryError.rateLimited(until: Date().addingTimeInterval(1), "slow down") }
            return [CountingHistory.purchase]
        }
        let ledger = try await Self.ledger(history)
        let queue = try #require(ledger.origins)
        let worker = Task { await queue.run() }
        defer { worker.cancel() }
        _ = try await Self.restore(ledger)
        try await Task.sleep(for: .milliseconds(300))
        let held = await queue.count
        #expect(history.calls.load(ordering: .relaxed) == 1 && held == 1, "held, not dropped, not hammered")
        #expect(try await Self.eventually { await queue.finished == 1 })
        #expect(history.calls.load(ordering: .relaxed) == 2)
    }

    @Test("a full queue drops new jobs; the posts stand")
    func bounded() async throws {
        let history = CountingHistory { _ in [CountingHistory.purchase] }
        let ledger = InMemoryLedger(history: history, logger: quietLogger)
        ledger.directory.addApp(Self.app, serverAPIKey: ServerAPIKey(keyID: "K", issuerID: "I", privateKeyPEM: "pem"))
        let small = OriginBackfills(backfill: BackfillHistory(handler: ledger.handler, archive: ledger.archive, inbox: ledger.inbox,
                                                              directory: ledger.directory, source: history, logger: quietLogger),
                                    capacity: 2, logger: quietLogger)
        for index in 1...4 {
            let posted = try await RecordAppStoreFactsTests.post(ledger, "u\(index)", [TestTransaction("r\(index)", "levels", original: "p\(index)")],
                                                                 named: "restore \(index)")
            await small.enqueue(origins: posted, post: .init(app: Self.app, userId: "u\(index)", deviceId: "phone", metadata: [:]),
                                environment: .production)
        }
        let queued = await small.count
        #expect(queued == 2)
    }
}
