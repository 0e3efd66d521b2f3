import LedgerApplication
import Logging
import PostgresNIO
import Synchronization

/// Statements prepared once per connection and executed many times: PostgreSQL plans them once
/// per connection instead of once per request.
///
/// For the hottest reads, whose planning costs more than their execution (the entitlements
/// statement: 0.24 ms to plan, 0.09 ms to run). They are prepared and executed with SQL's own
/// PREPARE and EXECUTE, so that their rows are read through the same collecting path as every
/// other statement of `DatabasePool.query` (see `allRows`); postgres-nio's prepared statements
/// read through its row sequence, and its older ones decode binary rows as text. EXECUTE takes
/// no bound parameters, so the arguments go in as quoted literals (`literal(_:)`). A
/// connection's statements are forgotten when it closes.
final class PreparedStatements: Sendable {
    /// A statement to prepare: a name for it (unique among the ledger's), its SQL with $1…, and
    /// the type of each argument as PREPARE names it. Arguments are given as text that the type
    /// reads (an array as `arrayText`), quoted as literals.
    struct Statement: Sendable {
        let name: String
        let sql: String
        let types: [String]

        var arguments: Int { types.count }

        /// A statement whose arguments are all text.
        init(name: String, sql: String, arguments: Int) {
            self.init(name: name, sql: sql, types: Array(repeating: "text", count: arguments))
        }

        init(name: String, sql: String, types: [String]) {
            self.name = name
            self.sql = sql
            self.types = types
        }
    }

    private struct Key: Hashable {
        let connection: ObjectIdentifier
        let name: String
    }

    private let prepared = Mutex<Set<Key>>([])

    /// Executes `statement` with `arguments` on `connection`, preparing it there first if it is
    /// not yet. One PostgreSQL no longer accepts as prepared (a view it reads changed its
    /// columns, or the session forgot it) is prepared again, once.
    func execute(_ statement: Statement, _ arguments: [String], on connection: PostgresConnection, logger: Logger) async throws -> [PostgresRow] {
        precondition(arguments.count == statement.arguments, "\(statement.name) takes \(statement.arguments) arguments")
        let key = Key(connection: ObjectIdentifier(connection), name: statement.name)
        let execute = PostgresQuery(unsafeSQL: "EXECUTE \(statement.name)(\(try arguments.map(Self.literal).joined(separator: ", ")))")
        try await prepare(statement, key, on: connection, logger: logger)
        do {
            return try await connection.allRows(execute, logger: logger)
        } catch let error as PSQLError where ["0A000", "26000"].contains(error.serverInfo?[.sqlState]) {
            logger.debug("prepared statement prepared again", metadata: [
                "ledger.statement": "\(statement.name)", "ledger.reason": "\(error.serverInfo?[.message] ?? "")",
            ])
            prepared.withLock { _ = $0.remove(key) }
            _ = try? await connection.allRows(PostgresQuery(unsafeSQL: "DEALLOCATE \(statement.name)"), logger: logger)
            try await prepare(statement, key, on: connection, logger: logger)
            return try await connection.allRows(execute, logger: logger)
        }
    }

    private func prepare(_ statement: Statement, _ key: Key, on connection: PostgresConnection, logger: Logger) async throws {
        guard !prepared.withLock({ $0.contains(key) }) else { return }
        let types = statement.types.joined(separator: ", ")
        _ = try await connection.allRows(PostgresQuery(unsafeSQL: "PREPARE \(statement.name) (\(types)) AS \(statement.sql)"), logger: logger)
        let first = prepared.withLock { known in
            let first = !known.contains { $0.connection == key.connection }
            known.insert(key)
            return first
        }
        if first {
            _ = ConnectionCloseWatch.shared.watch(connection) { [self] in
                prepared.withLock { known in known = known.filter { $0.connection != key.connection } }
            }
        }
    }

    /// A text value as an SQL literal, whatever `standard_conforming_strings` says: an escape
    /// string with its backslashes and quotes doubled. Text cannot hold U+0000, so neither can this.
    static func literal(_ value: String) throws -> String {
        guard !value.unicodeScalars.contains("\u{0}") else { throw StoreError.invalidInput("text values cannot contain U+0000") }
        var escaped = "E'"
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\\": escaped += "\\\\"
            case "'": escaped += "''"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped + "'"
    }

    /// Lookups by a list of keys are prepared for a fixed number of them, `= ANY(ARRAY[$n, …])`,
    /// the list padded with its last key (`padded`). PostgreSQL estimates `= ANY($1)` of an array
    /// argument at ten elements, which for the usual two to six keys looks dearer than planning
    /// each call: the prepared plan would never be used. A longer list is looked up unprepared.
    static let keyBuckets = [4, 8, 16, 32]

    /// The bucket a list of `count` keys is prepared for, if any.
    static func bucket(for count: Int) -> Int? { keyBuckets.first { $0 >= count } }

    /// `keys` as `bucket` arguments: the last key repeated (a key looked up twice is found once).
    static func padded(_ keys: [String], to bucket: Int) -> [String] {
        guard let last = keys.last else { return keys }
        return keys + Array(repeating: last, count: bucket - keys.count)
    }

    /// `$first, $first+1, …`: `count` placeholders.
    static func placeholders(from first: Int, count: Int) -> String {
        (first..<(first + count)).map { "$\($0)" }.joined(separator: ", ")
    }

    /// How many statements are prepared on open connections (for tests).
    var count: Int { prepared.withLock { $0.count } }
}
