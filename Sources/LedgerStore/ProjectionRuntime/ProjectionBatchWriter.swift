import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import NIOCore
import PostgresNIO
import Synchronization

/// Recomputes the rows of the users a batch of events touched, and writes them in one
/// transaction: what the runner does for every batch, and a rebuild for the events that arrive
/// while it builds.
///
/// Users are read through the same reader the commands decide on, so a projection's rows are
/// always a function of the user's stream and the app's catalog at the batch's last position.
struct ProjectionBatchWriter: Sendable {
    let client: DatabasePool
    let store: PostgresEventStore
    let reader: UserStreamReader
    /// Folds shared with the other projections of the same runner, when there are some.
    let folds: SharedFolds?
    /// Rows written by one transaction at most (besides the old rows deleted of users whose rows
    /// are replaced), unless one user alone has more.
    let rowsPerTransaction: Int
    /// What the writes did: transactions and rows (for benchmarks and tests).
    let statistics = WriteStatistics()
    /// The rows this writer last wrote of each user, so that a batch writes only what it adds.
    let written: WrittenRows
    let logger: Logger

    init(client: DatabasePool, folds: SharedFolds? = nil, rowsPerTransaction: Int = 5_000, rowsRemembered: Int = 200_000, logger: Logger) {
        self.client = client
        self.rowsPerTransaction = rowsPerTransaction
        self.written = WrittenRows(capacity: rowsRemembered)
        self.store = PostgresEventStore(client: client, logger: logger)
        self.reader = UserStreamReader(store: store, kept: folds?.kept)
        self.folds = folds
        self.logger = logger
    }

    /// Applies events to any table of the projection's shape, without a checkpoint (rebuilds).
    func applyRows(_ events: [RecordedEvent], to projection: any UserProjection.Type, table: String) async throws {
        guard let last = events.last?.position else { return }
        try await write(try await rows(for: events, projection, upTo: last), to: projection, table: table, checkpoint: nil)
    }

    /// The rows of every user the batch touched, folded up to `last`. A product's first
    /// definition touches the users who recorded something of the product before it (their facts
    /// take that definition); any later definition applies to later facts only and touches nobody.
    func rows(for events: [RecordedEvent], _ projection: any UserProjection.Type, upTo last: Int64) async throws -> [(UserKey, [AnyProjectionRow])] {
        var users: [UserKey] = []
        var seen = Set<UserKey>()
        var batches: [UserKey: [RecordedEvent]] = [:]
        typealias Tail = UserStreamReader.Tail
        for event in events {
            if case .catalog(let app) = StreamID.kind(of: event.streamID) {
                let catalog = try await self.catalog(of: app, upTo: last)
                for user in try await self.users(of: app, touchedBy: event, catalog: catalog) where seen.insert(user).inserted {
                    users.append(user)
                }
                continue
            }
            guard let user = UserKey(streamID: event.streamID) else { continue }
            if seen.insert(user).inserted { users.append(user) }
            batches[user, default: []].append(event)
        }
        var tails = batches.mapValues { Tail(batch: $0) }
        try await readMissing(users, into: &tails, upTo: last)
        var rows: [(UserKey, [AnyProjectionRow])] = []
        var catalogs: [String: ProductCatalog] = [:]
        for user in users {
            let catalog: ProductCatalog
            if let known = catalogs[user.app] {
                catalog = known
            } else {
                catalog = try await self.catalog(of: user.app, upTo: last)
                catalogs[user.app] = catalog
            }
            let state: UserLedger
            do {
                let stream = try StreamID.user(app: user.app, user: user.user)
                if let folds {
                    state = try await folds.state(of: stream, upTo: last, catalog: catalog, tail: tails[user], reader: reader)
                } else {
                    state = try await reader.state(of: stream, upToPosition: last, catalog: catalog, tail: tails[user])
                }
            } catch let error as UnknownEventType {
                throw Self.unreadable(in: events, of: user) ?? ProjectionFailure(message: "cannot fold user \(user.app)/\(user.user): \(error)", position: last)
            } catch let error as DecodingError {
                throw Self.unreadable(in: events, of: user) ?? ProjectionFailure(message: "cannot fold user \(user.app)/\(user.user): \(error)", position: last)
            } catch {
                // Any other failure of the fold: an event of the user's this code cannot read says where.
                if !(error is CancellationError), let failure = Self.unreadable(in: events, of: user) { throw failure }
                throw error
            }
            rows.append((user, projection.anyRows(app: user.app, user: user.user, state: state, catalog: catalog)))
        }
        return rows
    }

    /// The first of the user's events in the batch that this code cannot read, as the failure that
    /// stops the projection there: every user event must be one it understands, never skipped.
    /// Looked for only once a fold has failed, since every fold reads each of its events anyway.
    static func unreadable(in events: [RecordedEvent], of user: UserKey) -> ProjectionFailure? {
        for event in events where UserKey(streamID: event.streamID) == user {
            do {
                _ = try UserEvent(type: event.type, data: event.data)
            } catch {
                return ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
            }
        }
        return nil
    }

    /// Reads, in one statement, the events the batch lacks to fold its users: for each user
    /// whose kept fold does not end right before the user's first event in the batch (a fold
    /// forgotten or never made, as after a start; or a user a catalog change touches, who has no
    /// events in the batch), the stream from the kept fold on, up to `last`. Without this, each of
    /// those users' folds read the stream by itself, one query each. Users another projection has
    /// folded to `last` already, or whose kept fold is past it (a projection behind the others),
    /// are left to the fold.
    private func readMissing(
        _ users: [UserKey], into tails: inout [UserKey: UserStreamReader.Tail], upTo last: Int64
    ) async throws {
        guard let folds else { return }
        var wanted: [(user: UserKey, stream: StreamID, afterVersion: Int64)] = []
        for user in users {
            guard let stream = try? StreamID.user(app: user.app, user: user.user), !folds.has(stream, upTo: last) else { continue }
            let kept = folds.kept.kept(user: stream.rawValue)
            if let kept, kept.lastPosition > last { continue }
            let version = kept?.version ?? 0
            if tails[user]?.afterVersion == version { continue }
            wanted.append((user, stream, version))
        }
        guard !wanted.isEmpty else { return }
        let read = try await store.readStreams(wanted.map { ($0.stream, $0.afterVersion) }, upToPosition: last)
        let events = read.values.reduce(0) { $0 + $1.count }
        folds.kept.count(eventsRead: events)
        folds.noteReadTogether(streams: wanted.count, events: events)
        for (user, stream, version) in wanted {
            tails[user] = .init(afterVersion: version, events: read[stream.rawValue] ?? [])
        }
    }

    /// The app's catalog up to `last`: the runner's shared fold when there is one.
    private func catalog(of app: String, upTo last: Int64) async throws -> ProductCatalog {
        if let folds { return try await folds.catalog(app: app, upTo: last, reader: reader) }
        return try await reader.catalog(app: app, upToPosition: last)
    }

    /// The users of `app` whose rows a catalog event changes: for a product's first definition,
    /// those with an event naming the product before it (through the `events_product` index of
    /// migration 0013); for a redefinition, none. `catalog` is the app's, at or past the event.
    private func users(of app: String, touchedBy event: RecordedEvent, catalog: ProductCatalog) async throws -> [UserKey] {
        let definition: ProductDefined
        do {
            guard event.type == ProductDefined.typeName.stored else { throw UnknownEventType(type: event.type) }
            definition = try LedgerJSON.decode(ProductDefined.self, from: event.data)
        } catch {
            throw ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
        }
        guard catalog.history[definition.product.productId]?.first?.position == event.position else { return [] }
        let rows = try await client.query(
            """
            SELECT DISTINCT stream_id FROM ledger.events
            WHERE COALESCE(data -> 'fields' ->> 'product_id', data -> 'fields' ->> 'productId', data ->> 'productId') = \(definition.product.productId)
              AND "position" < \(event.position) AND starts_with(stream_id, \(StreamID.userPrefix(app: app)))
            """,
            logger: logger
        )
        var users: [UserKey] = []
        for try await stream in rows.decode(String.self) {
            if let user = UserKey(streamID: stream) { users.append(user) }
        }
        return users
    }

    /// Replaces the rows of the batch's users in `table` and, with `checkpoint`, moves the
    /// version's checkpoint from `from` to `to`, in one transaction.
    ///
    /// Locks in the order every writer of a projection takes them (see
    /// `ProjectionTables.withRegistryLocked`): the version's row in `ledger.projections` first, then
    /// its table. A switch-over holding the row makes the batch wait for it, and a batch holding the
    /// row makes the switch wait; neither ever holds what the other holds while waiting for more.
    ///
    /// Only what changed: when this writer moved the checkpoint to `from` itself, it knows every
    /// user's rows in the table (`WrittenRows`), and a user whose rows only gained some has just
    /// those copied in; a user who lost or changed a row, or whose rows it does not know, has all
    /// of them replaced. A user's history length then costs a batch nothing in the database.
    ///
    /// Bounded: users whose rows add up to more than `rowsPerTransaction` are written in several
    /// transactions, each checking the checkpoint, the last one moving it. Until the last commits,
    /// readers see some of these users' rows as of the batch's end under the old checkpoint (rows
    /// ahead of it, never behind); a runner stopped in between applies the batch again from the
    /// checkpoint, rewriting the same rows.
    func write(
        _ rows: [(UserKey, [AnyProjectionRow])], to projection: any UserProjection.Type, table name: String,
        checkpoint: (from: Int64, to: Int64)?
    ) async throws {
        guard let checkpoint else {
            // Written past what this writer knows of the table: it knows none of its rows now.
            written.forget(table: name)
            let all = rows.map { UserRows(user: $0.0, rows: projection.columnValues(of: $0.1), replacing: true) }
            for chunk in Self.chunks(all, rowsPerTransaction: rowsPerTransaction) {
                try await write(chunk, to: projection, table: name, checkpoint: nil, movingIt: true)
            }
            return
        }
        let changes = self.changes(rows, of: projection, in: name, through: checkpoint.from)
        let chunks = Self.chunks(changes, rowsPerTransaction: rowsPerTransaction)
        do {
            for (index, chunk) in chunks.enumerated() {
                try await write(chunk, to: projection, table: name, checkpoint: checkpoint, movingIt: index == chunks.count - 1)
            }
        } catch {
            written.forget(table: name)
            throw error
        }
        written.remember(rows, in: name, from: checkpoint.from, to: checkpoint.to)
    }

    /// What a batch writes to `table` of each user, given the user's rows now: the rows they
    /// gained when this writer knows the table as of `checkpoint` and they lost none, else all of
    /// them, replacing theirs. Compared typed; only what is written is written out as text.
    private func changes(
        _ rows: [(UserKey, [AnyProjectionRow])], of projection: any UserProjection.Type, in table: String, through checkpoint: Int64
    ) -> [UserRows] {
        let known = written.rows(in: table, through: checkpoint)
        return rows.map { user, rows in
            if let before = known?[user], let added = Self.added(to: before, giving: rows) {
                UserRows(user: user, rows: projection.columnValues(of: added), replacing: false)
            } else {
                UserRows(user: user, rows: projection.columnValues(of: rows), replacing: true)
            }
        }
    }

    /// One projection's part of a batch written together with the others' (`write(together:upTo:)`):
    /// its rows of the batch's users, and the checkpoint the batch moves on from.
    struct TableWrite {
        let projection: any UserProjection.Type
        let rows: [(UserKey, [AnyProjectionRow])]
        let from: Int64
    }

    /// Writes several projections' rows of one batch, and moves each one's checkpoint from its
    /// `from` to `last`, in one transaction: what the live projections of a runner do with every
    /// batch. The checkpoints are checked, locked together, before any row is written, as `write`
    /// checks one. When the rows pass `rowsPerTransaction` (a catalog change touching many users),
    /// each projection is written on its own, in transactions of that size.
    func write(together writes: [TableWrite], upTo last: Int64) async throws {
        let changes = writes.map { self.changes($0.rows, of: $0.projection, in: $0.projection.tableName, through: $0.from) }
        let rowCount = changes.reduce(0) { $0 + $1.reduce(0) { $0 + $1.rows.count } }
        guard writes.count > 1, rowCount <= rowsPerTransaction else {
            for write in writes {
                try await self.write(write.rows, to: write.projection, table: write.projection.tableName, checkpoint: (write.from, last))
            }
            return
        }
        let names = writes.map { $0.projection.name.rawValue }
        let versions = writes.map { $0.projection.version }
        do {
            try await client.withConnection { connection in
                try await connection.transaction(logger: logger) { connection in
                    // Locked in one order, so that nobody locking several of them can deadlock with this.
                    let current = try await connection.query(
                        """
                        SELECT p.name, p.version, p.position, p.status
                        FROM ledger.projections p JOIN unnest(\(names)::text[], \(versions)::int[]) AS u(name, version)
                          ON p.name = u.name AND p.version = u.version
                        ORDER BY p.name, p.version FOR UPDATE OF p
                        """,
                        logger: logger
                    ).collect()
                    var found: [String: (position: Int64, status: String)] = [:]
                    for row in current {
                        let (name, version, position, status) = try row.decode((String, Int, Int64, String).self)
                        found["\(name) \(version)"] = (position, status)
                    }
                    // As in `write`: only from the checkpoints this runner read, only while followed.
                    for write in writes {
                        let now = found["\(write.projection.name.rawValue) \(write.projection.version)"]
                        guard let now, now.position == write.from,
                              [ProjectionState.live, .building].contains(ProjectionState(rawValue: now.status)) else {
                            throw CheckpointMoved(projection: write.projection.tableName)
                        }
                    }
                    for (write, rows) in zip(writes, changes) {
                        try await writeRows(rows, of: write.projection, in: write.projection.tableName, on: connection)
                    }
                    statistics.note(rows: rowCount, users: changes.map(\.count).max() ?? 0)
                    // Forward only, as in `write`.
                    try await connection.query(
                        """
                        UPDATE ledger.projections p SET position = \(last), updated_at = now()
                        FROM unnest(\(names)::text[], \(versions)::int[]) AS u(name, version)
                        WHERE p.name = u.name AND p.version = u.version AND p.position < \(last)
                        """,
                        logger: logger
                    )
                }
            }
        } catch {
            for write in writes { written.forget(table: write.projection.tableName) }
            throw error
        }
        for write in writes {
            written.remember(write.rows, in: write.projection.tableName, from: write.from, to: last)
        }
    }

    /// What a user's rows gained, when they lost none (as multisets); nil when some went.
    static func added<Row: Hashable>(to before: [Row], giving after: [Row]) -> [Row]? {
        if before == after { return [] }
        if after.count >= before.count, after[..<before.count].elementsEqual(before) { return Array(after[before.count...]) }
        var left: [Row: Int] = [:]
        for row in before { left[row, default: 0] += 1 }
        var added: [Row] = []
        for row in after {
            if let count = left[row] {
                left[row] = count > 1 ? count - 1 : nil
            } else {
                added.append(row)
            }
        }
        return left.isEmpty ? added : nil
    }

    /// What a batch writes of one user: rows to add, or all the user's rows, replacing theirs.
    struct UserRows {
        let user: UserKey
        let rows: [[String?]]
        let replacing: Bool
    }

    /// Users in order, cut where their rows would pass `rowsPerTransaction`; at least one chunk.
    static func chunks<Row>(_ rows: [(UserKey, [Row])], rowsPerTransaction: Int) -> [[(UserKey, [Row])]] {
        chunks(rows, rowsPerTransaction: rowsPerTransaction, counting: \.1.count)
    }

    static func chunks(_ rows: [UserRows], rowsPerTransaction: Int) -> [[UserRows]] {
        chunks(rows, rowsPerTransaction: rowsPerTransaction, counting: \.rows.count)
    }

    private static func chunks<User>(_ users: [User], rowsPerTransaction: Int, counting rowsOf: (User) -> Int) -> [[User]] {
        var chunks: [[User]] = [[]]
        var count = 0
        for user in users {
            if count + rowsOf(user) > rowsPerTransaction, !chunks[chunks.count - 1].isEmpty {
                chunks.append([])
                count = 0
            }
            chunks[chunks.count - 1].append(user)
            count += rowsOf(user)
        }
        return chunks
    }

    private func write(
        _ rows: [UserRows], to projection: any UserProjection.Type, table name: String,
        checkpoint: (from: Int64, to: Int64)?, movingIt moves: Bool
    ) async throws {
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                if let checkpoint {
                    let current = try await connection.query(
                        """
                        SELECT position, status FROM ledger.projections
                        WHERE name = \(projection.name) AND version = \(projection.version) FOR UPDATE
                        """,
                        logger: logger
                    ).collect()
                    // Only from the checkpoint this runner read, and only while the version is
                    // followed: a second runner cannot apply twice, nor anyone write a version that a
                    // rebuild has replaced or that failed meanwhile.
                    let (position, status) = try current.first?.decode((Int64, String).self) ?? (Int64(-1), "")
                    guard position == checkpoint.from, [ProjectionState.live, .building].contains(ProjectionState(rawValue: status)) else {
                        throw CheckpointMoved(projection: projection.tableName)
                    }
                }
                try await writeRows(rows, of: projection, in: name, on: connection)
                statistics.note(rows: rows.reduce(0) { $0 + $1.rows.count }, users: rows.count)
                guard moves, let checkpoint, checkpoint.to > checkpoint.from else { return }
                // Forward only; the database refuses anything else (0010_projection_checkpoints.sql).
                try await connection.query(
                    """
                    UPDATE ledger.projections SET position = \(checkpoint.to), updated_at = now()
                    WHERE name = \(projection.name) AND version = \(projection.version) AND position < \(checkpoint.to)
                    """,
                    logger: logger
                )
            }
        }
    }

    /// Applies events to `table` inside the caller's transaction, without a checkpoint: a
    /// rebuild's last catch-up, done under the switch-over's locks.
    func applyRows(_ events: [RecordedEvent], to projection: any UserProjection.Type, table: String, on connection: PostgresConnection) async throws {
        guard let last = events.last?.position else { return }
        written.forget(table: table)
        let rows = try await rows(for: events, projection, upTo: last).map {
            UserRows(user: $0.0, rows: projection.columnValues(of: $0.1), replacing: true)
        }
        try await writeRows(rows, of: projection, in: table, on: connection)
    }

    /// Deletes the rows of the users replacing theirs from `ledger.<name>` and copies the given
    /// rows in, inside the caller's transaction.
    private func writeRows(
        _ rows: [UserRows], of projection: any UserProjection.Type, in name: String, on connection: PostgresConnection
    ) async throws {
        let replaced = rows.filter(\.replacing).map(\.user)
        if !replaced.isEmpty {
            try await connection.query(
                """
                DELETE FROM ledger.\(unescaped: name) t USING unnest(\(replaced.map(\.app)), \(replaced.map(\.user))) AS u(app, user_id)
                WHERE t.app = u.app AND t.user_id = u.user_id
                """,
                logger: logger
            )
        }
        let all = rows.flatMap { user in user.rows.map { [user.user.app, user.user.user] + $0 } }
        guard !all.isEmpty else { return }
        // One INSERT of the rows as a JSON array, not COPY: postgres-nio 1.33.2 stops the whole
        // process (a precondition in its copy state) when the connection fails in the middle of a
        // COPY, and a batch is written whenever PostgreSQL may go away.
        let columns = ["app", "user_id"] + projection.columns.map(\.name)
        let types = ["text", "text"] + projection.columns.map { $0.type.replacingOccurrences(of: " NOT NULL", with: "") }
        let values = types.enumerated().map { index, type in type == "text" ? "r ->> \(index)" : "(r ->> \(index))::\(type)" }
        try await connection.query(
            """
            INSERT INTO ledger.\(unescaped: name) (\(unescaped: columns.joined(separator: ", ")))
            SELECT \(unescaped: values.joined(separator: ", ")) FROM jsonb_array_elements(\(Self.json(all))::jsonb) AS r
            """,
            logger: logger
        )
    }

    /// Rows of text values as one JSON array of arrays, nil as null.
    static func json(_ rows: [[String?]]) -> String {
        var out = "["
        out.reserveCapacity(rows.count * 128)
        for (index, row) in rows.enumerated() {
            out += index == 0 ? "[" : ",["
            for (column, value) in row.enumerated() {
                if column > 0 { out += "," }
                if let value {
                    LedgerJSON.appendQuoted(value, to: &out)
                } else {
                    out += "null"
                }
            }
            out += "]"
        }
        return out + "]"
    }
}

/// The rows a batch writer last wrote of each user, per table, and the checkpoint its last write
/// moved the table to: while the table's checkpoint is still that one, nobody else has written
/// it (a batch moves a checkpoint only from where it found it, and one runner leads), so these
/// are the table's rows of those users. Forgotten on any failed write, on a write without a
/// checkpoint, and when the runner starts leading again; bounded to `capacity` rows per table
/// (past it, some users are forgotten, and their next batch replaces their rows whole).
final class WrittenRows: Sendable {
    private struct Table {
        var through: Int64
        var users: [UserKey: [AnyProjectionRow]] = [:]
        var rows = 0
    }

    private let tables = Mutex<[String: Table]>([:])
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The users' rows in `table`, if this writer's last write moved it to `checkpoint`.
    func rows(in table: String, through checkpoint: Int64) -> [UserKey: [AnyProjectionRow]]? {
        tables.withLock { tables in
            guard let known = tables[table], known.through == checkpoint else { return nil }
            return known.users
        }
    }

    /// Notes the rows a write from checkpoint `from` to `to` left of its users: with what is known
    /// of the others when it is known as of `from`, else alone.
    func remember(_ rows: [(UserKey, [AnyProjectionRow])], in table: String, from: Int64, to checkpoint: Int64) {
        tables.withLock { tables in
            var known = tables.removeValue(forKey: table).flatMap { $0.through == from ? $0 : nil } ?? Table(through: checkpoint)
            known.through = checkpoint
            for (user, userRows) in rows {
                known.rows += userRows.count - (known.users.updateValue(userRows, forKey: user)?.count ?? 0)
            }
            if known.rows > capacity {
                for (user, userRows) in known.users {
                    guard known.rows > capacity - capacity / 10 else { break }
                    known.users[user] = nil
                    known.rows -= userRows.count
                }
            }
            tables[table] = known
        }
    }

    func forget(table: String) {
        _ = tables.withLock { $0.removeValue(forKey: table) }
    }

    func forgetAll() {
        tables.withLock { $0 = [:] }
    }
}

/// Transactions a batch writer committed or tried, and the most rows one of them wrote.
public final class WriteStatistics: Sendable {
    public struct Counts: Sendable {
        public var transactions = 0
        public var rows = 0
        public var largestRows = 0
        public var largestUsers = 0
    }

    private let counts = Mutex(Counts())

    public var current: Counts { counts.withLock { $0 } }

    /// Starts the largest transaction's figures over (the totals keep counting).
    public func resetLargest() {
        counts.withLock { counts in
            counts.largestRows = 0
            counts.largestUsers = 0
        }
    }

    func note(rows: Int, users: Int) {
        counts.withLock { counts in
            counts.transactions += 1
            counts.rows += rows
            counts.largestRows = max(counts.largestRows, rows)
            counts.largestUsers = max(counts.largestUsers, users)
        }
    }
}

/// The app and user of a `user/<bundle id>/<user id>` stream.
struct UserKey: Hashable, Sendable {
    let app: String
    let user: String

    init?(streamID: String) {
        guard case .user(let app, let user) = StreamID.kind(of: streamID) else { return nil }
        self.app = app
        self.user = user
    }

    init(app: String, user: String) {
        self.app = app
        self.user = user
    }
}

/// PostgreSQL COPY text format.
public enum CopyText {
    public static func line(_ values: [String?]) -> String {
        values.map { value in
            guard let value else { return "\\N" }
            var escaped = ""
            for character in value.unicodeScalars {
                switch character {
                case "\\": escaped += "\\\\"
                case "\t": escaped += "\\t"
                case "\n": escaped += "\\n"
                case "\r": escaped += "\\r"
                default: escaped.unicodeScalars.append(character)
                }
            }
            return escaped
        }.joined(separator: "\t") + "\n"
    }
}
