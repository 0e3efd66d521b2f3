import Foundation
import LedgerApplication
import LedgerDomain
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("Commands decide on the user's stream and never double-count")
struct UserCommandHandlerTests {
    static let app = "com.example.app"

    func handler(_ client: DatabasePool) async throws -> UserCommandHandler {
        let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
        try await handler.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: Self.app)
        return handler
    }

    func postReceipt(_ handler: UserCommandHandler, user: String, _ transactions: [TestTransaction]) async throws
        -> UserCommandHandler.Outcome<[String]> {
        try await handler.execute(app: Self.app, user: user) { state, _ in
            let decision = try TestReceipts.observe(transactions, app: Self.app, on: state)
            return (decision.events, decision.duplicates)
        }
    }

    @Test("20 concurrent consumptions of a balance of 10: exactly 10 succeed, the rest are refused with the balance")
    func concurrentConsumption() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            _ = try await postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 10)])
            let results = await withTaskGroup(of: Result<Void, any Error>.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        do {
                            _ = try await handler.execute(app: Self.app, user: "u1") { state, catalog in
                                (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
                            }
                            return .success(())
                        } catch {
                            return .failure(error)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let succeeded = results.filter { if case .success = $0 { true } else { false } }.count
            #expect(succeeded == 10)
            for case .failure(let error) in results {
                #expect((error as? DecisionError)?.code == .insufficientBalance)
                #expect((error as? DecisionError)?.balance == 0)
            }
            let state = try await handler.reader.state(app: Self.app, user: "u1")
            #expect(state.balance(of: "coins") == 0)
        }
    }

    @Test("the same receipt posted 50 times at once is recorded once")
    func concurrentReceipts() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<50 {
                    group.addTask { _ = try await postReceipt(handler, user: "u2", [TestTransaction.coins("77", quantity: 5)]) }
                }
                try await group.waitForAll()
            }
            let events = try await PostgresEventStore(client: client, logger: TestDatabase.logger)
                .readStream(StreamID.user(app: Self.app, user: "u2"), fromVersion: 1, limit: 100)
            #expect(events.map(\.type) == ["ReceiptPosted.v1", "AppStoreTransactionObserved.v1"])
            #expect(try await handler.reader.state(app: Self.app, user: "u2").balance(of: "coins") == 5)
        }
    }

    @Test("a transaction another user recorded is refused and records nothing for this user")
    func ownedByAnotherUser() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            let first = try await postReceipt(handler, user: "alice", [TestTransaction.coins("500")])
            let error = try await #require(throws: CommandError.self) {
                _ = try await postReceipt(handler, user: "mallory", [TestTransaction.coins("500")])
            }
            #expect(error.code == .ownedByAnotherUser)
            #expect(error.position == first.append?.position)
            #expect(!error.message.contains("alice"))
            #expect(try await handler.reader.state(app: Self.app, user: "mallory").version == 0)
        }
    }

    @Test("a key another user recorded refuses the append itself: nothing of the post is recorded, and its document is not kept")
    func ownedByAnotherUserAtTheAppend() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            let first = try await postReceipt(handler, user: "alice", [TestTransaction.coins("600")])
            let events = try await Self.eventCount(client)
            let documents = try await Self.documentCount(client)
            // No lookup precedes the append: the post, a new transaction and alice's transaction go to one append.
            let document = AppStoreDocument(app: Self.app, receiptHash: String(repeating: "ab", count: 32), receiptData: "mallory's receipt",
                                            answerHash: String(repeating: "cd", count: 32), environment: "sandbox", status: 0,
                                            answeredAt: Date(), answer: Data("{}".utf8))
            let error = try await #require(throws: CommandError.self) {
                _ = try await handler.execute(app: Self.app, user: "mallory", keeping: document) { state, _ in
                    let decision = try TestReceipts.observe([TestTransaction.coins("601"), TestTransaction.coins("600")], app: Self.app, on: state)
                    return (decision.events, ())
                }
            }
            #expect(error.code == .ownedByAnotherUser)
            #expect(error.position == first.append?.position)
            #expect(try await Self.eventCount(client) == events, "nothing appended, not even the new transaction")
            #expect(try await Self.documentCount(client) == documents, "the refused post's receipt and answer are not kept")
            #expect(try await handler.reader.state(app: Self.app, user: "mallory").version == 0)

            // The same document with an append that is not refused is kept with it.
            let kept = try await handler.execute(app: Self.app, user: "mallory", keeping: document) { state, _ in
                (try TestReceipts.observe([TestTransaction.coins("601")], app: Self.app, on: state).events, ())
            }
            #expect(kept.append?.appendedCount ?? 0 > 0)
            #expect(try await Self.documentCount(client) == documents + 2)
        }
    }

    /// Receipts and answers kept.
    static func documentCount(_ client: DatabasePool) async throws -> Int64 {
        for try await count in try await client.query(
            "SELECT (SELECT count(*) FROM ledger.receipts) + (SELECT count(*) FROM ledger.receipt_answers)", logger: TestDatabase.logger
        ).decode(Int64.self) {
            return count
        }
        return -1
    }

    static func eventCount(_ client: DatabasePool) async throws -> Int64 {
        for try await count in try await client.query("SELECT count(*) FROM ledger.events", logger: TestDatabase.logger).decode(Int64.self) {
            return count
        }
        return -1
    }

    @Test("a product unknown when bought is recorded as unknown; the catalog as of a position is what it was then")
    func catalogAsOf() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            let outcome = try await handler.execute(app: Self.app, user: "u3") { state, _ in
                let decision = try TestReceipts.observe([TestTransaction("900", "gems", purchased: Date())], app: Self.app,
                                                        environment: .sandbox, on: state)
                return (decision.events, ())
            }
            #expect(outcome.state.transactions["900"]?.productType == .unknown)
            let before = try #require(outcome.append?.position)
            try await handler.defineProduct(try Product(productId: "gems", type: .consumable), app: Self.app)
            #expect(try await handler.reader.catalog(app: Self.app, upToPosition: before).type(of: "gems") == .unknown)
            #expect(try await handler.reader.catalog(app: Self.app).type(of: "gems") == .consumable)
            // Defining it again unchanged records nothing.
            #expect(try await handler.defineProduct(try Product(productId: "gems", type: .consumable), app: Self.app) == nil)
        }
    }

    @Test("as-of answers fold only what was recorded by then, by time or by position")
    func asOf() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = try await handler(client)
            let bought = try await postReceipt(handler, user: "u4", [TestTransaction.coins("41", quantity: 4)])
            let consumed = try await handler.execute(app: Self.app, user: "u4") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 3, deviceId: "phone", catalog: catalog, on: state), ())
            }
            let events = try await PostgresEventStore(client: client, logger: TestDatabase.logger)
                .readStream(StreamID.user(app: Self.app, user: "u4"), fromVersion: 1, limit: 10)
            let boughtAt = try #require(events.first { $0.type == "AppStoreTransactionObserved.v1" }).recordedAt

            #expect(try await handler.reader.state(app: Self.app, user: "u4", upToPosition: try #require(bought.append?.position)).balance(of: "coins") == 4)
            #expect(try await handler.reader.state(app: Self.app, user: "u4", upToPosition: try #require(consumed.append?.position)).balance(of: "coins") == 1)
            #expect(try await handler.reader.asOf(app: Self.app, user: "u4", recordedBy: boughtAt).0.balance(of: "coins") == 4)
            #expect(try await handler.reader.asOf(app: Self.app, user: "u4", recordedBy: boughtAt.addingTimeInterval(-60)).0.version == 0)
            #expect(try await handler.reader.asOf(app: Self.app, user: "u4", recordedBy: Date()).0.balance(of: "coins") == 1)
        }
    }
}
