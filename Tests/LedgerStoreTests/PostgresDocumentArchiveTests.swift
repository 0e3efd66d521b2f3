import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
import PostgresNIO
@testable import LedgerStore
import Testing

@Suite("The documents Apple sent are kept once, on their own or by the append that records what they say")
struct PostgresDocumentArchiveTests {
    static let app = "com.example.app"

    static func document(receipt: String, answer: String, at seconds: TimeInterval = 1_750_000_000) -> AppStoreDocument {
        AppStoreDocument(
            app: app, receiptHash: ContentHash.sha256Hex(Data(receipt.utf8)), receiptData: receipt,
            answerHash: ContentHash.sha256Hex(Data(answer.utf8)), environment: "sandbox", status: 0,
            answeredAt: Date(timeIntervalSince1970: seconds), answer: Data(answer.utf8)
        )
    }

    static func counts(_ client: DatabasePool) async throws -> (receipts: Int, answers: Int) {
        let rows = try await client.query(
            "SELECT (SELECT count(*) FROM ledger.receipts)::int, (SELECT count(*) FROM ledger.receipt_answers)::int"
        ).collect()
        let (receipts, answers) = try rows[0].decode((Int, Int).self)
        return (receipts, answers)
    }

    @Test func aDocumentKeptOnItsOwnIsKeptOnceAndAnotherAnswerToTheSameReceiptBeside() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let archive = PostgresDocumentArchive(client: client, logger: TestDatabase.logger)
            let first = Self.document(receipt: "MIIT-receipt", answer: #"{"status":0,"receipt":{"n":1}}"#)
            try await archive.keep(first)
            try await archive.keep(first)
            #expect(try await Self.counts(client) == (1, 1))

            let second = Self.document(receipt: "MIIT-receipt", answer: #"{"status":0,"receipt":{"n":2}}"#, at: 1_750_000_060)
            try await archive.keep(second)
            #expect(try await Self.counts(client) == (1, 2))
            #expect(try await archive.receipt(first.receiptHash) == "MIIT-receipt")
            let answers = try await archive.answers(toReceipt: first.receiptHash)
            #expect(answers.map(\.answerHash) == [first.answerHash, second.answerHash])
            #expect(answers.map(\.answer) == [#"{"status":0,"receipt":{"n":1}}"#, #"{"status":0,"receipt":{"n":2}}"#])
            #expect(answers.allSatisfy { $0.environment == "sandbox" && $0.status == 0 })
            #expect(answers.first?.answeredAt == first.answeredAt)
        }
    }

    @Test func theAppendKeepsItsDocumentAndARefusedAppendKeepsNothing() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let archive = PostgresDocumentArchive(client: client, logger: TestDatabase.logger)
            let stream = try StreamID.user(app: Self.app, user: "alice")
            let kept = Self.document(receipt: "MIIT-kept", answer: #"{"status":0}"#)
            _ = try await store.append([try .purchase("100", app: Self.app)], to: stream, expecting: .noStream, keeping: kept)
            #expect(try await archive.receipt(kept.receiptHash) == "MIIT-kept")
            #expect(try await archive.answers(toReceipt: kept.receiptHash).map(\.answer) == [#"{"status":0}"#])

            // The stream is at version 1, not 5: nothing of the append, nor its document, is kept.
            let refused = Self.document(receipt: "MIIT-refused", answer: #"{"status":0,"n":2}"#)
            await #expect(throws: (any Error).self) {
                try await store.append([try .purchase("101", app: Self.app)], to: stream, expecting: .exactly(5), keeping: refused)
            }
            #expect(try await archive.receipt(refused.receiptHash) == nil)
            #expect(try await archive.answers(toReceipt: refused.receiptHash).isEmpty)
            #expect(try await Self.counts(client) == (1, 1))
        }
    }
}
