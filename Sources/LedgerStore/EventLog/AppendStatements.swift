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
        WITH appended AS (\(AppendStatement.sql)), \(KeptDocument.commonTableExpressions(after: "appended", firstParameter: 9))
        SELECT * FROM appended
        """
    static let bindingDataTypes: [PostgresDataType] = AppendStatement.callTypes + KeptDocument.types

    let call: AppendStatement.Call
    let document: AppStoreDocument

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 16)
        call.bind(into: &bindings)
        KeptDocument.bind(document, into: &bindings)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}

/// A kept document's two inserts, the receipt and the answer, each once (content-addressed):
/// written once here for the append that keeps its document (`AppendKeepingStatement`) and for
/// a document kept on its own (`KeepDocumentStatement`).
enum KeptDocument {
    /// The parameters' types, in the order `bind(_:into:)` appends them.
    static let types: [PostgresDataType] = [.text, .text, .text, .text, .text, .int4, .timestamptz, .text]

    /// The common table expressions `kept_receipt` and `kept_answer`, for a statement's `WITH`,
    /// with the document as parameters from `$firstParameter` on. They run once `source` (a common
    /// table expression of the same statement) has given a row, and not without one: after an
    /// append's rows, so that `ledger.append` is the transaction's first write whatever order
    /// PostgreSQL runs the parts of a statement in.
    static func commonTableExpressions(after source: String, firstParameter first: Int) -> String {
        let parameter = { (offset: Int) in "$\(first + offset)" }
        let after = "FROM (SELECT FROM \(source) LIMIT 1) AS after"
        return """
            kept_receipt AS (
                INSERT INTO ledger.receipts (receipt_hash, app, receipt_data)
                SELECT \(parameter(0)), \(parameter(1)), \(parameter(2)) \(after)
                ON CONFLICT (receipt_hash) DO NOTHING
            ), kept_answer AS (
                INSERT INTO ledger.receipt_answers (answer_hash, receipt_hash, environment, status, answered_at, answer)
                SELECT \(parameter(3)), \(parameter(0)), \(parameter(4)), \(parameter(5)), \(parameter(6)), \(parameter(7)) \(after)
                ON CONFLICT (answer_hash) DO NOTHING
            )
            """
    }

    static func bind(_ document: AppStoreDocument, into bindings: inout PostgresBindings) {
        bindings.append(document.receiptHash)
        bindings.append(document.app)
        bindings.append(document.receiptData)
        bindings.append(document.answerHash)
        bindings.append(document.environment)
        bindings.append(Int32(clamping: document.status))
        bindings.append(document.answeredAt)
        bindings.append(String(decoding: document.answer, as: UTF8.self))
    }
}

/// A document kept on its own, for a post that appends nothing. Its commit does not wait for
/// the disk (`synchronous_commit` off for this transaction only): the log is flushed in order,
/// so once a later append is durable, so is this.
struct KeepDocumentStatement: PostgresPreparedStatement {
    typealias Row = PostgresRow

    static let name = "ledger_keep_document"
    static let sql = """
        WITH unflushed AS (SELECT set_config('synchronous_commit', 'off', true)), \(KeptDocument.commonTableExpressions(after: "unflushed", firstParameter: 1))
        SELECT 1
        """
    static let bindingDataTypes: [PostgresDataType] = KeptDocument.types

    let document: AppStoreDocument

    func makeBindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 8)
        KeptDocument.bind(document, into: &bindings)
        return bindings
    }

    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
