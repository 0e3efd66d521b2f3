import Foundation
import LedgerApplication
@testable import LedgerDomain
import LedgerTesting
import Logging
import Testing

/// The command handler and the stream reader against the event store's contract, in memory: no
/// database, so these pin the application's rules and run in milliseconds.
@Suite("Commands decide on the user's stream (in memory)")
struct UserCommandHandlerTests {
    static let app = "com.example.app"

    static func handler(_ store: InMemoryEventStore) async throws -> UserCommandHandler {
        let handler = UserCommandHandler(store: store, logger: quietLogger)
        try await handler.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: app)
        return handler
    }

    static func postReceipt(
        _ handler: UserCommandHandler, user: String, _ transactions: [TestTransaction]
    ) async throws -> UserCommandHandler.Outcome<[String]> {
        try await handler.execute(app: app, user: user) { state, _ in
            let decision = try TestReceipts.observe(transactions, app: app, on: state)
            return (decision.events, decision.duplicates)
        }
    }

    @Test("a receipt posted twice records its purchase once; the second post lists it as a duplicate")
    func receiptTwice() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        let first = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 5)])
        #expect(first.append?.appendedCount == 2, "the post and the transaction observed")
        let second = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 5)])
        #expect(second.append == nil)
        #expect(second.value == ["1"])
        #expect(second.state.balance(of: "coins") == 5)
        #expect(await store.events.count == 3, "the catalog's product and the user's two events")
    }

    @Test("another writer appending between the read and the append makes the handler decide again on the new state")
    func conflictDecidesAgain() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        _ = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 1)])
        // Between the handler's read and its append, another command uses the only coin.
        await store.setBeforeAppend { store in
            let other = UserCommandHandler(store: store, logger: quietLogger)
            _ = try await other.execute(app: Self.app, user: "u1") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "tablet", catalog: catalog, on: state), ())
            }
        }
        await #expect(throws: DecisionError.self) {
            _ = try await handler.execute(app: Self.app, user: "u1") { state, catalog in
                (try UserDecisions.consume(productId: "coins", quantity: 1, deviceId: "phone", catalog: catalog, on: state), ())
            }
        }
        let state = try await handler.reader.state(app: Self.app, user: "u1")
        #expect(state.balance(of: "coins") == 0, "one consumption, never two")
    }

    @Test("a receipt another post recorded first: the answer's state includes what that post recorded")
    func loserSeesTheWinnersWrite() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        _ = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 5)])
        // The same receipt, posted at once by another request, lands between this one's read and append.
        await store.setBeforeAppend { store in
            let other = try await Self.handler(store)
            _ = try await Self.postReceipt(other, user: "u1", [TestTransaction.coins("2", quantity: 3)])
        }
        let loser = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("2", quantity: 3)])
        let append = try #require(loser.append)
        #expect(append.isDuplicate)
        #expect(loser.state.balance(of: "coins") == 8, "the answer names the winner's position, so it shows the winner's coins")
        #expect(loser.state.lastPosition >= append.position)
    }

    @Test("a transaction belongs to the first user who posted it: another user's post is refused and records nothing")
    func transactionOfAnotherUser() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        let owner = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("7")])
        let before = await store.events.count
        await #expect(throws: CommandError.self) {
            _ = try await Self.postReceipt(handler, user: "u2", [TestTransaction.coins("7")])
        }
        #expect(await store.events.count == before)
        #expect(owner.state.balance(of: "coins") == 1)
    }

    @Test("another user posting the same transaction between the lookup and the append: refused, and nothing of the post is recorded")
    func transactionOfAnotherUserAtTheAppend() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        await store.setBeforeAppend { store in
            let other = try await Self.handler(store)
            _ = try await Self.postReceipt(other, user: "u1", [TestTransaction.coins("8")])
        }
        let error = try await #require(throws: CommandError.self) {
            _ = try await Self.postReceipt(handler, user: "u2", [TestTransaction.coins("9"), TestTransaction.coins("8")])
        }
        #expect(error.code == .ownedByAnotherUser)
        #expect(try await handler.reader.state(app: Self.app, user: "u2").version == 0, "not even the new transaction 9")
    }

    @Test("the reader answers as of a past position and folds the catalog of that moment")
    func readsThePast() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        let bought = try await Self.postReceipt(handler, user: "u1", [TestTransaction.coins("1", quantity: 4)])
        let position = try #require(bought.append?.position)
        try await handler.defineProduct(try Product(productId: "gems", type: .consumable), app: Self.app)
        _ = try await handler.execute(app: Self.app, user: "u1") { state, catalog in
            (try UserDecisions.consume(productId: "coins", quantity: 3, deviceId: "phone", catalog: catalog, on: state), ())
        }
        #expect(try await handler.reader.state(app: Self.app, user: "u1", upToPosition: position).balance(of: "coins") == 4)
        #expect(try await handler.reader.state(app: Self.app, user: "u1").balance(of: "coins") == 1)
        #expect(try await handler.reader.catalog(app: Self.app, upToPosition: position).type(of: "gems") == .unknown)
        #expect(try await handler.reader.catalog(app: Self.app).type(of: "gems") == .consumable)
    }

    @Test("redefining a product exactly as it is records nothing")
    func sameDefinitionTwice() async throws {
        let store = InMemoryEventStore()
        let handler = try await Self.handler(store)
        #expect(try await handler.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: Self.app) == nil)
        #expect(await store.events.count == 1)
    }

    @Test("a catalog stream holding something other than product definitions is an error, not skipped")
    func strictCatalog() async throws {
        let store = InMemoryEventStore()
        _ = try await store.append([try NewEvent(DeviceRegistered(deviceId: "x"))], to: try .catalog(app: Self.app), expecting: .any)
        await #expect(throws: UnknownEventType.self) {
            _ = try await UserStreamReader(store: store).catalog(app: Self.app)
        }
    }
}
