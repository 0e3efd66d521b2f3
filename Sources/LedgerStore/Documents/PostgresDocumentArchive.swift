import Foundation
import LedgerApplication
import Logging
import PostgresNIO

/// `DocumentArchive` in PostgreSQL: every receipt a device posted and every answer the App Store gave, as they were sent
/// (`ledger.receipts`, `ledger.receipt_answers`, append-only, content-addressed).
///
/// Written before the facts drawn from them are appended, so a fact never names a document that
/// is not kept; a crash in between leaves a document no fact names yet, which the same post
/// later simply reuses.
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
    /// Its commit does not wait for the disk (`synchronous_commit` off for this transaction only):
    /// the facts that name the documents are appended afterwards, and the log is flushed in order,
    /// so once an append that names them is durable, so are they. A crash before that append loses
    /// at most documents no fact names, which the same post keeps again.
    public func keep(_ document: AppStoreDocument) async throws {
        let answer = String(decoding: document.answer, as: UTF8.self)
        try await client.query(
            """
            WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)),
            receipt AS (
                INSERT INTO ledger.receipts (receipt_hash, app, receipt_data)
                VALUES (\(document.receiptHash), \(document.app), \(document.receiptData))
                ON CONFLICT (receipt_hash) DO NOTHING
            )
            INSERT INTO ledger.receipt_answers (answer_hash, receipt_hash, environment, status, answered_at, answer)
            SELECT \(document.answerHash), \(document.receiptHash), \(document.environment), \(document.status),
                   \(document.answeredAt), \(answer)
            FROM unflushed
            ON CONFLICT (answer_hash) DO NOTHING
            """,
            logger: logger
        )
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
