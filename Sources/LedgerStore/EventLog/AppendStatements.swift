import Foundation
import LedgerApplication
import PostgresNIO

/// `ledger.append`'s call as a statement postgres-nio prepares once per connection: PostgreSQL
/// parses and plans it once, not for every append. Its plan is a function scan whatever the
/// log's size (the function's own queries are planned inside it), so unlike the lookups
/// (`LogReach`) it is prepared from the first append.
struct AppendStatement: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let name = "ledger_append_call"
    static let sql = """
        SELECT event_id, "position", stream_id, stream_version, duplicate, dedup_key, recorded_at
        FROM ledger.append($1, $2, $3, $4, $5, $6, array_replace($7, '', NULL), $8)
        """
    static let bindingDataTypes: [PostgresDataType] = callTypes

    /// `ledger.append`'s arguments: the stream, the expected version (none for any), the events'
    /// ids, types, data and metadata, their keys ('' for none), whether to look for duplicates.
    static let callTypes: [PostgresDataType] = [.text, .int8, .uuidArray, .textArray, .textArray, .textArray, .textArray, .bool]

    struct Call: Sendable {
        let stream: String
        let expected: Int64?
        let ids: [UUID]
        let types: [String]
        let data: [String]
        let metadata: [String]
        let keys: [String]
        let checkDuplicates: Bool

        func bind(into bindings: inout PostgresBindings) {
            bindings.append(stream)
            bindings.append(expected)
            bindings.append(ids)
            bindings.append(types)
            bindings.append(data)
            bindings.append(metadata)
            bindings.append(keys)
            bindings.append(checkDuplicates)
        }
    }

    let call: Call

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 8)
        call.bind(into: &bindings)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// The append with the App Store document its events name, kept by the same statement once the
/// append has given a row (so that `ledger.append` is the transaction's first write, and a
/// refused append keeps nothing): the receipt and the answer, each once (content-addressed).
struct AppendKeepingStatement: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let name = "ledger_append_keeping"
    static let sql = """
        WITH appended AS (
            SELECT event_id, "position", stream_id, stream_version, duplicate, dedup_key, recorded_at
            FROM ledger.append($1, $2, $3, $4, $5, $6, array_replace($7, '', NULL), $8)
        ), kept_receipt AS (
            INSERT INTO ledger.receipts (receipt_hash, app, receipt_data)
            SELECT $9, $10, $11 FROM (SELECT FROM appended LIMIT 1) AS after
            ON CONFLICT (receipt_hash) DO NOTHING
        ), kept_answer AS (
            INSERT INTO ledger.receipt_answers (answer_hash, receipt_hash, environment, status, answered_at, answer)
            SELECT $12, $9, $13, $14, $15, $16 FROM (SELECT FROM appended LIMIT 1) AS after
            ON CONFLICT (answer_hash) DO NOTHING
        )
        SELECT * FROM appended
        """
    static let bindingDataTypes: [PostgresDataType] = AppendStatement.callTypes + [.text, .text, .text, .text, .text, .int4, .timestamptz, .text]

    let call: AppendStatement.Call
    let document: AppStoreDocument

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 16)
        call.bind(into: &bindings)
        bindings.append(document.receiptHash)
        bindings.append(document.app)
        bindings.append(document.receiptData)
        bindings.append(document.answerHash)
        bindings.append(document.environment)
        bindings.append(Int32(clamping: document.status))
        bindings.append(document.answeredAt)
        bindings.append(String(decoding: document.answer, as: UTF8.self))
        return bindings
    }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
