import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// `DocumentArchive` in PostgreSQL: every receipt a device posted and every answer the App Store gave, as they were sent
/// (`ledger.receipts`, `ledger.receipt_answers`, append-only, content-addressed).
///
/// Written by the statement that appends the facts drawn from them, or on their own for a post
/// that appends nothing: a fact never names a document that is not kept.
public struct PostgresDocumentArchive: DocumentArchive, Sendable {
    /// A kept answer, for support and for fixes that re-read fields.
    public struct KeptAnswer: Sendable, Hashable {
        public let answerHash: String
        public let environment: String
        public let status: Int
        public let answeredAt: Date
        public let answer: String
    }

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Stores the receipt and the answer unless they are already kept. One statement: both or neither.
    ///
    /// For a document kept apart from an append (a post that records nothing new); a post that
    /// appends keeps its document in the append's own statement (`EventStore.append(_:to:expecting:keeping:)`).
    /// Its commit does not wait for the disk (see `KeepDocumentStatement`).
    public func keep(_ document: AppStoreDocument) async throws {
        _ = try await client.execute(KeepDocumentStatement(document: document), logger: logger)
    }

    /// Every answer kept for a receipt, oldest first.
    public func answers(toReceipt receiptHash: String) async throws -> [KeptAnswer] {
        let rows = try await client.query(
            """
            SELECT answer_hash, environment, status, answered_at, answer FROM ledger.receipt_answers
            WHERE receipt_hash = \(receiptHash) ORDER BY answered_at, answer_hash
            """,
            logger: logger
        )
        var answers: [KeptAnswer] = []
        for try await (hash, environment, status, answeredAt, answer) in rows.decode((String, String, Int, Date, String).self) {
            answers.append(KeptAnswer(answerHash: hash, environment: environment, status: status, answeredAt: answeredAt, answer: answer))
        }
        return answers
    }

    /// The receipt as posted, if kept.
    public func receipt(_ receiptHash: String) async throws -> String? {
        let rows = try await client.query(
            "SELECT receipt_data FROM ledger.receipts WHERE receipt_hash = \(receiptHash)", logger: logger
        )
        for try await data in rows.decode(String.self) { return data }
        return nil
    }
}
