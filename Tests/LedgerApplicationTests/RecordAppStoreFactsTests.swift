import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
import Logging
import Testing

/// The use case every receipt, signed transaction and history goes through, in memory: its
/// branches and races without PostgreSQL.
@Suite("Recording an App Store answer's facts (in memory)")
struct RecordAppStoreFactsTests {
    static let app = "com.example.app"

    static func ledger() async throws -> InMemoryLedger {
        let ledger = InMemoryLedger(logger: quietLogger)
        ledger.directory.addApp(app)
        _ = try await ledger.commands.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: app,
                                                    metadata: [:])
        return ledger
    }

    /// A receipt of these transactions as the App Store answers it, and its document.
    static func receipt(_ transactions: [TestTransaction], named name: String = "receipt") -> (AppStoreAnswer, AppStoreDocument) {
        let answer = TestReceipts.answer(transactions, receipt: name)
        let document = AppStoreDocument(app: app, receiptHash: answer.receiptHash, receiptData: name, answerHash: answer.answerHash,
                                        environment: answer.environment.rawValue, status: 0, answeredAt: answer.answeredAt,
                                        answer: Data("{}".utf8))
        return (answer, document)
    }

    static func post(_ ledger: InMemoryLedger, _ user: String, _ transactions: [TestTransaction], named name: String = "receipt")
        async throws -> RecordAppStoreFacts.Recording
    {
        let (answer, document) = receipt(transactions, named: name)
        return try await ledger.recordFacts(answer, document: document, post: .init(app: app, userId: user, deviceId: "phone", metadata: [:]))
    }

    @Test("a receipt's facts are recorded once: posted again it records nothing and answers where its facts are")
    func postedTwice() async throws {
        let ledger = try await Self.ledger()
        let first = try await Self.post(ledger, "u1", [.coins("1", quantity: 5)])
        #expect(first.recorded.map(\.kind) == ["receipt", "purchase"])
        #expect(first.state.balance(of: "coins") == 5)
        let again = try await Self.post(ledger, "u1", [.coins("1", quantity: 5)])
        #expect(again.recorded.isEmpty)
        #expect(again.duplicates.map(\.transactionId) == ["1"])
        #expect(again.position == first.recorded.last?.position, "the position of the purchase it repeats")
        #expect(ledger.archive.documents.count == 1, "the same receipt and answer are kept once")
    }

    @Test("a transaction another user holds is left to them and listed; the poster's own are recorded")
    func anotherUsersTransaction() async throws {
        let ledger = try await Self.ledger()
        _ = try await Self.post(ledger, "u1", [.coins("7")], named: "one")
        let mixed = try await Self.post(ledger, "u2", [.coins("7"), .coins("8")], named: "two")
        #expect(mixed.notRecorded == ["7"])
        #expect(mixed.recorded.compactMap(\.transactionId) == ["8"])
        #expect(try await ledger.handler.reader.state(app: Self.app, user: "u1").balance(of: "coins") == 1, "7 stays u1's")
    }

    @Test("another user posting a transaction between the lookup and the append: the post is decided again and leaves it out")
    func claimRace() async throws {
        let ledger = try await Self.ledger()
        await ledger.store.setBeforeAppend { _ in
            _ = try await Self.post(ledger, "u1", [.coins("9")], named: "first")
        }
        let second = try await Self.post(ledger, "u2", [.coins("9"), .coins("10")], named: "second")
        #expect(second.notRecorded == ["9"], "decided again once the append refused the key another stream took")
        #expect(second.state.balance(of: "coins") == 1)
        #expect(try await ledger.handler.reader.state(app: Self.app, user: "u1").balance(of: "coins") == 1)
    }

    @Test("a notification that waited for its user is copied to the user's stream in the same append as the post that brings its transaction")
    func waitingNotificationApplied() async throws {
        let ledger = try await Self.ledger()
        // As Apple signs it: StoreKit's names, dates in milliseconds.
        let refund = ["transactionId": "21", "originalTransactionId": "21", "productId": "coins", "quantity": "2", "type": "Consumable",
                      "purchaseDate": String(TestTransaction.defaultDate.milliseconds), "inAppOwnershipType": "PURCHASED",
                      "revocationDate": String(TestTransaction.defaultDate.addingTimeInterval(3_600).milliseconds), "revocationReason": "0"]
        let notification = AppStoreNotificationReceived(
            notificationUUID: "n-1", notificationType: "REFUND", subtype: nil, environment: .production,
            signedDate: TestTransaction.defaultDate.addingTimeInterval(3_600), fields: [:], transaction: refund, renewalInfo: nil,
            payloadHash: TestReceipts.digest("n-1")
        )
        let (_, document) = Self.receipt([], named: "notification")
        let waited = try await ledger.notifications(notification, document: document, app: Self.app, metadata: [:])
        #expect(waited.kind == .waiting && waited.userId == nil)
        let posted = try await Self.post(ledger, "u1", [.init("21", "coins", quantity: 2)])
        let kinds = posted.recorded.map(\.kind)
        #expect(kinds.contains("notification") && kinds.contains("purchase"), "\(kinds)")
        #expect(Set(posted.recorded.map(\.position)).count == posted.recorded.count)
        #expect(posted.state.balance(of: "coins") == 0, "the refund the notification carried takes the two coins back")
        let again = try await ledger.notifications(notification, document: document, app: Self.app, metadata: [:])
        #expect(again.kind == .duplicate, "Apple's retry records nothing")
    }

    @Test("a notification for an app nobody registered records nothing")
    func unknownApp() async throws {
        let ledger = InMemoryLedger(logger: quietLogger)
        let notification = AppStoreNotificationReceived(
            notificationUUID: "n-2", notificationType: "TEST", subtype: nil, environment: .sandbox, signedDate: TestTransaction.defaultDate,
            fields: [:], transaction: nil, renewalInfo: nil, payloadHash: TestReceipts.digest("n-2")
        )
        let (_, document) = Self.receipt([], named: "test")
        let error = try await #require(throws: NotificationIntakeError.self) {
            _ = try await ledger.notifications(notification, document: document, app: "com.example.nobody", metadata: [:])
        }
        #expect(error.code == .unknownApp)
        #expect(await ledger.store.events.isEmpty && ledger.archive.documents.isEmpty)
    }

    @Test("a backfill records Apple's history for the user, production first, then the sandbox when production does not know it")
    func backfillFallsBackToTheSandbox() async throws {
        let history = ScriptedHistory(sandbox: [
            HistoryTransaction(fields: ["transactionId": "31", "originalTransactionId": "31", "productId": "coins", "quantity": "3",
                                        "purchaseDate": "1735689600000", "type": "Consumable", "inAppOwnershipType": "PURCHASED"],
                               signedDate: TestTransaction.defaultDate),
        ])
        let ledger = InMemoryLedger(history: history, logger: quietLogger)
        ledger.directory.addApp(Self.app, serverAPIKey: ServerAPIKey(keyID: "K", issuerID: "I", privateKeyPEM: "pem"))
        let backfill = BackfillHistory(handler: ledger.handler, archive: ledger.archive, inbox: ledger.inbox, directory: ledger.directory,
                                       source: history, logger: quietLogger)
        let result = try await backfill(app: Self.app, user: "u1", transactionId: "31", environment: nil)
        #expect(result.environment == .sandbox && result.fetched == 1)
        #expect(result.recording.recorded.map(\.kind) == ["history", "purchase"])
        #expect(result.recording.state.balance(of: "coins") == 3)
        let without = InMemoryLedger(logger: quietLogger)
        without.directory.addApp(Self.app)
        let refused = try await #require(throws: BackfillError.self) {
            _ = try await BackfillHistory(handler: without.handler, archive: without.archive, inbox: without.inbox, directory: without.directory,
                                          source: history, logger: quietLogger)(app: Self.app, user: "u1", transactionId: "31", environment: nil)
        }
        #expect(refused.message.contains("ledger apps appstore-key"), "says how to add a key: \(refused.message)")
    }
}

/// Apple's history as a test scripts it: what each environment knows.
struct ScriptedHistory: TransactionHistorySource {
    var production: [HistoryTransaction] = []
    var sandbox: [HistoryTransaction] = []

    func history(of transactionId: String, app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> [HistoryTransaction] {
        let known = environment == .production ? production : sandbox
        guard known.contains(where: { $0.fields["transactionId"] == transactionId || $0.fields["originalTransactionId"] == transactionId }) else {
            throw TransactionHistoryError.transactionNotFound(transactionId)
        }
        return known
    }
}
