import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import NIOCore
import PostgresNIO

/// Rebuilds a projection from position 0 into new tables while the live version keeps serving,
/// then either switches readers over atomically or reports how the rebuilt rows differ.
///
/// The build folds the whole log in memory in one ordered, gap-safe pass and writes the rows with
/// COPY; events that arrive meanwhile are applied in batches like the runner does. The switch
/// replaces the live table and its checkpoint in one transaction, never moving the checkpoint
/// back (see `switchOver`): a runner working on the old table finds its checkpoint moved and
/// continues from the new one. Killed at any point, a rebuild leaves the live version as it was
/// (or, with several projections, some switched and the rest as they were); run again, it gives
/// the rows an uninterrupted one gives.
public struct ProjectionRebuilder: Sendable {
    /// Progress after each chunk of the scan.
    public struct Progress: Sendable {
        public let position: Int64
        public let head: Int64
        public let events: Int
        public let elapsed: Duration
    }

    /// How the rebuilt rows differ from the live ones, per key.
    public struct Difference: Sendable, Codable, Hashable {
        public enum Change: String, Sendable, Codable {
            case added, removed, changed
        }

        public let change: Change
        public let app: String
        public let user: String
        /// The key columns' values.
        public let key: [String: String?]
        public let before: [String: String?]?
        public let after: [String: String?]?
    }

    public struct Report: Sendable {
        public let projection: String
        public let version: Int
        public let position: Int64
        public let events: Int
        public let seconds: Double
        /// Nil when the rebuild switched over; the differences when it was a dry run.
        public let differences: [Difference]?
        public let liveVersion: Int?
    }

    let client: DatabasePool
    let store: PostgresEventStore
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.store = PostgresEventStore(client: client, logger: logger)
        self.logger = logger
    }

    // MARK: Building

    /// Folds the log up to its gap-safe head into per-user states and catalogs.
    struct Fold: Sendable {
        var users: [UserKey: UserLedger] = [:]
        var catalogs: [String: ProductCatalog] = [:]
        var position: Int64 = 0
        var events = 0

        mutating func apply(_ decoded: Decoded) {
            switch decoded {
            case .user(let user, let event, let version, let context):
                users[user, default: UserLedger()].gather(event, version: version, context: context)
            case .catalog(let app, let definition, let position):
                catalogs[app, default: ProductCatalog()].apply(definition, position: position)
            case .other:
                break
            }
        }

        /// Judges every user's transactions once, with their app's catalog and its history.
        mutating func classify() {
            for (user, state) in users {
                users[user] = state.classified(by: catalogs[user.app] ?? ProductCatalog())
            }
        }
    }

    func scan(upTo limit: Int64, progress: @Sendable (Progress) -> Void) async throws -> Fold {
        var fold = Fold()
        let started = ContinuousClock.now
        let head = min(try await store.headPosition(), limit)
        let pageSize = 20_000
        var page = try await store.readAll(after: 0, stream: nil, limit: pageSize).filter { $0.position <= limit }
        while let last = page.last {
            // The next page is read while this one is decoded (the database and this process
            // work at the same time), and decoding uses every core.
            let more = page.count == pageSize && last.position < limit
            async let next = more
                ? store.readAll(after: last.position, stream: nil, limit: pageSize).filter { $0.position <= limit }
                : []
            for decoded in try await Self.decode(page) {
                fold.apply(decoded)
            }
            fold.position = last.position
            fold.events += page.count
            progress(Progress(position: fold.position, head: max(head, fold.position), events: fold.events, elapsed: .now - started))
            page = try await next
        }
        fold.classify()
        return fold
    }

    /// One event, decoded, with what the fold needs of its envelope.
    enum Decoded: Sendable {
        case user(UserKey, UserEvent, version: Int64, UserLedger.Context)
        case catalog(app: String, ProductDefined, position: Int64)
        case other
    }

    /// Decodes a page in parallel chunks, keeping the page's order.
    static func decode(_ page: [RecordedEvent]) async throws -> [Decoded] {
        let chunks = max(1, min(ProcessInfo.processInfo.activeProcessorCount, page.count / 1_000))
        let size = (page.count + chunks - 1) / chunks
        return try await withThrowingTaskGroup(of: (Int, [Decoded]).self) { group in
            for chunk in 0..<chunks {
                let slice = Array(page[min(page.count, chunk * size)..<min(page.count, (chunk + 1) * size)])
                group.addTask { (chunk, try slice.map(decode)) }
            }
            var parts = [[Decoded]](repeating: [], count: chunks)
            for try await (index, part) in group { parts[index] = part }
            return parts.flatMap { $0 }
        }
    }

    static func decode(_ event: RecordedEvent) throws -> Decoded {
        if let user = UserKey(streamID: event.streamID) {
            do {
                return .user(user, try UserEvent(type: event.type, data: event.data), version: event.streamVersion,
                             .init(position: event.position, recordedAt: event.recordedAt))
            } catch {
                throw ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
            }
        }
        if case .catalog(let app) = StreamID.kind(of: event.streamID), event.type == ProductDefined.typeName.stored {
            return .catalog(app: app, try LedgerJSON.decode(ProductDefined.self, from: event.data), position: event.position)
        }
        return .other
    }

    /// Builds `projection` into `table` (created afresh) and returns the position it reflects.
    func build(
        _ projection: any UserProjection.Type, into table: String, upTo limit: Int64 = .max,
        progress: @Sendable (Progress) -> Void
    ) async throws -> (position: Int64, events: Int) {
        let fold = try await scan(upTo: limit, progress: progress)
        try await write(fold, projection, into: table)
        return (fold.position, fold.events)
    }

    /// Writes a projection's rows for a folded log into `table`, created afresh.
    func write(_ fold: Fold, _ projection: any UserProjection.Type, into table: String) async throws {
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                _ = try await connection.query(ProjectionTables.createTable(projection, named: table, replacing: true), logger: logger).collect()
                try await connection.query("SET LOCAL search_path = ledger", logger: logger)
                try await connection.copyRows(
                    into: table, columns: ["app", "user_id"] + projection.columns.map(\.name), logger: logger
                ) { writer in
                    var buffer = ByteBuffer()
                    for (user, state) in fold.users {
                        for row in projection.columnValues(app: user.app, user: user.user, state: state,
                                                           catalog: fold.catalogs[user.app] ?? ProductCatalog()) {
                            buffer.writeString(CopyText.line([user.app, user.user] + row))
                        }
                        if buffer.readableBytes > 1 << 18 {
                            try await writer.write(buffer)
                            buffer.clear()
                        }
                    }
                    if buffer.readableBytes > 0 { try await writer.write(buffer) }
                }
                // Unnamed: the table is renamed on switch-over, and the next rebuild's table takes this name.
                for index in ProjectionTables.createIndexes(projection, on: table, named: false) {
                    _ = try await connection.query(index, logger: logger).collect()
                }
            }
        }
    }

    /// Applies the events after `position` to `table` in batches, as the runner does, until the
    /// gap-safe head; returns the new position.
    func catchUp(_ projection: any UserProjection.Type, table: String, from position: Int64) async throws -> Int64 {
        let batches = ProjectionBatchWriter(client: client, logger: logger)
        var position = position
        while true {
            let events = try await store.readAll(after: position, stream: nil, limit: 1_000)
            guard let last = events.last else { return position }
            try await batches.applyRows(events, to: projection, table: table)
            position = last.position
        }
    }

    // MARK: Rebuild

    /// Rebuilds `projection` (the code's current version): switches over, or with `dryRun` only
    /// reports the differences from the live version and drops what it built.
    public func rebuild(
        _ projection: any UserProjection.Type,
        dryRun: Bool,
        progress: @Sendable (Progress) -> Void = { _ in }
    ) async throws -> Report {
        let started = ContinuousClock.now
        let table = "\(projection.tableName)_rebuild"
        let live = try await liveVersion(of: projection)
        if dryRun {
            // Never past the live version's checkpoint: the rebuilt rows are then brought up to
            // it, never the live ones down (older code's fold may no longer exist).
            let (position, events) = try await build(projection, into: table, upTo: live?.position ?? .max, progress: progress)
            do {
                let differences = try await difference(projection, rebuilt: table, rebuiltAt: position, live: live)
                _ = try await client.query(ProjectionTables.dropTable(table), logger: logger).collect()
                return Report(projection: projection.name.rawValue, version: projection.version, position: differences.position,
                              events: events, seconds: Self.seconds(.now - started), differences: differences.rows,
                              liveVersion: live?.version)
            } catch {
                _ = try? await client.query(ProjectionTables.dropTable(table), logger: logger).collect()
                throw error
            }
        }
        var (position, events) = try await build(projection, into: table, progress: progress)
        position = try await catchUp(projection, table: table, from: position)
        position = try await switchOver(projection, rebuilt: table, at: position)
        return Report(projection: projection.name.rawValue, version: projection.version, position: position, events: events,
                      seconds: Self.seconds(.now - started), differences: nil, liveVersion: projection.version)
    }

    /// Rebuilds several projections from one scan of the log and switches each over.
    public func rebuildAll(
        _ projections: [any UserProjection.Type],
        progress: @Sendable (Progress) -> Void = { _ in }
    ) async throws -> [Report] {
        let started = ContinuousClock.now
        let fold = try await scan(upTo: .max, progress: progress)
        // The tables are written concurrently: producing rows is this process's work, COPY the
        // database's, and there is a core for each.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for projection in projections {
                group.addTask { try await write(fold, projection, into: "\(projection.tableName)_rebuild") }
            }
            try await group.waitForAll()
        }
        var reports: [Report] = []
        for projection in projections {
            let table = "\(projection.tableName)_rebuild"
            var position = try await catchUp(projection, table: table, from: fold.position)
            position = try await switchOver(projection, rebuilt: table, at: position)
            reports.append(Report(projection: projection.name.rawValue, version: projection.version, position: position, events: fold.events,
                                  seconds: Self.seconds(.now - started), differences: nil, liveVersion: projection.version))
        }
        return reports
    }

    struct LiveVersion {
        let version: Int
        let position: Int64
        var table: String
    }

    func liveVersion(of projection: any UserProjection.Type) async throws -> LiveVersion? {
        let rows = try await client.query(
            "SELECT version, position FROM ledger.projections WHERE name = \(projection.name) AND status = \(ProjectionState.live)",
            logger: logger
        ).collect()
        guard let row = rows.first else { return nil }
        let (version, position) = try row.decode((Int, Int64).self)
        return LiveVersion(version: version, position: position, table: "\(projection.name.rawValue)_v\(version)")
    }

    /// How long a switch-over keeps trying to get its locks (see `ProjectionTables.withRegistryLocked`):
    /// a long query on the view delays the switch, never the readers behind it.
    static let switchPatience = Duration.seconds(300)

    /// Makes the rebuilt table the live one, with its checkpoint, in one transaction.
    ///
    /// Locks as the runner does, rows of `ledger.projections` before tables: a runner's batch in
    /// flight finishes first, and the next waits until the switch is done (then finds its
    /// checkpoint moved and continues from the new one). Under those locks the rebuilt rows are
    /// brought up to the furthest checkpoint of the versions they replace, since the runner may
    /// have applied events after the rebuild's last catch-up: the checkpoint never moves back, and
    /// a read answered at a position is never followed by one answered below it.
    func switchOver(_ projection: any UserProjection.Type, rebuilt table: String, at position: Int64) async throws -> Int64 {
        let batches = ProjectionBatchWriter(client: client, logger: logger)
        let store = store
        let logger = logger
        return try await ProjectionTables.withRegistryLocked(client, logger: logger, patience: Self.switchPatience) { connection in
            let versions = try await connection.query(
                """
                SELECT version, position FROM ledger.projections
                WHERE name = \(projection.name) AND status = ANY(\([ProjectionState.live, .building, .failed].map(\.rawValue))) FOR UPDATE
                """,
                logger: logger
            ).collect().map { try $0.decode((Int, Int64).self) }
            // Rolled back with the switch if it has to try again, so it starts from `position` each time.
            var position = position
            let furthest = versions.map(\.1).max() ?? 0
            while position < furthest {
                let events = try await store.readSettled(after: position, through: furthest)
                guard let last = events.last else { break }
                try await batches.applyRows(events, to: projection, table: table, on: connection)
                position = last.position
            }
            // Nothing else is up to `furthest`, a checkpoint: the rows are those of `furthest`.
            position = max(position, furthest)
            for (version, _) in versions where version != projection.version {
                try await connection.query(
                    "UPDATE ledger.projections SET status = \(ProjectionState.retired), updated_at = now() WHERE name = \(projection.name) AND version = \(version)",
                    logger: logger
                )
            }
            // The view depends on the tables: it goes first and comes back on the rebuilt one.
            try await ProjectionTables.lockReadersOut(on: connection, logger: logger)
            _ = try await connection.query(ProjectionTables.dropView(of: projection), logger: logger).collect()
            for version in Set(versions.map(\.0) + [projection.version]) {
                _ = try await connection.query(ProjectionTables.dropTable("\(projection.name.rawValue)_v\(version)"), logger: logger).collect()
            }
            _ = try await connection.query(ProjectionTables.renameTable(table, to: projection.tableName), logger: logger).collect()
            try await ProjectionTables.commentColumns(projection, on: connection, logger: logger)
            try await ProjectionTables.pointView(of: projection, on: connection, logger: logger)
            // At or past the version's own checkpoint, as the database insists (0010_projection_checkpoints.sql).
            try await connection.query(
                """
                INSERT INTO ledger.projections (name, version, position, status) VALUES (\(projection.name), \(projection.version), \(position), \(ProjectionState.live))
                ON CONFLICT (name, version) DO UPDATE SET position = EXCLUDED.position,
                    status = \(ProjectionState.live), error = NULL, error_position = NULL, updated_at = now()
                """,
                logger: logger
            )
            return position
        }
    }

    // MARK: Difference

    /// Compares the rebuilt table with the live one at the same position. The live table and its
    /// checkpoint are read in one snapshot, so they agree; the rebuilt table is brought to that
    /// checkpoint first (or the live one waits for the rebuilt one).
    private func difference(
        _ projection: any UserProjection.Type, rebuilt table: String, rebuiltAt position: Int64, live: LiveVersion?
    ) async throws -> (rows: [Difference], position: Int64) {
        let liveTable = live.map { "ledger.\($0.table)" }
        var rebuiltPosition = position
        for _ in 0..<50 {
            let result: (rows: [Difference], position: Int64)? = try await client.withConnection { connection in
                try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ", logger: logger)
                do {
                    var livePosition: Int64 = 0
                    if let live {
                        let rows = try await connection.query(
                            "SELECT position FROM ledger.projections WHERE name = \(projection.name) AND version = \(live.version)",
                            logger: logger
                        ).collect()
                        livePosition = try rows.first?.decode(Int64.self) ?? 0
                    }
                    guard liveTable == nil || livePosition <= rebuiltPosition else {
                        try await connection.query("ROLLBACK", logger: logger)
                        rebuiltPosition = try await catchUp(projection, table: table, upTo: livePosition, from: rebuiltPosition)
                        return nil
                    }
                    let rows = try await compare(projection, live: liveTable, rebuilt: "ledger.\(table)", on: connection)
                    try await connection.query("COMMIT", logger: logger)
                    return (rows, rebuiltPosition)
                } catch {
                    await connection.rollBackUnlessClosed(logger: logger)
                    throw error
                }
            }
            if let result { return result }
        }
        throw StoreError.integrity("the live projection kept moving; run the dry run again when writes are quieter")
    }

    private func catchUp(_ projection: any UserProjection.Type, table: String, upTo target: Int64, from position: Int64) async throws -> Int64 {
        let batches = ProjectionBatchWriter(client: client, logger: logger)
        var position = position
        while position < target {
            let events = try await store.readSettled(after: position, through: target)
            guard let last = events.last else { break }
            try await batches.applyRows(events, to: projection, table: table)
            position = last.position
        }
        // Nothing else is up to the target, a checkpoint: the rows are those of the target.
        return max(position, target)
    }

    private func compare(
        _ projection: any UserProjection.Type, live: String?, rebuilt: String, on connection: PostgresConnection
    ) async throws -> [Difference] {
        let keys = ["app", "user_id"] + projection.keyColumns
        var all = ["app", "user_id"] + projection.columns.map(\.name)
        // Each compared column's value on the live side: itself, or what an older version meant by it.
        var liveValues = Dictionary(uniqueKeysWithValues: all.map { ($0, "r.\($0)::text") })
        if let live {
            // A live table of an older version may lack columns the new version adds: those are
            // not differences of the fold, so only the columns both have are compared, and those
            // the projection says what the older versions meant by.
            let name = String(live.dropFirst("ledger.".count))
            let rows = try await connection.query(
                "SELECT column_name::text FROM information_schema.columns WHERE table_schema = 'ledger' AND table_name = \(name)",
                logger: logger
            ).collect()
            let liveColumns = Set(try rows.map { try $0.decode(String.self) })
            let formerly = Dictionary(uniqueKeysWithValues: projection.columns.compactMap { column in column.formerly.map { (column.name, $0) } })
            all = all.filter { liveColumns.contains($0) || formerly[$0] != nil }
            for column in all where !liveColumns.contains(column) { liveValues[column] = "(\(formerly[column]!))::text" }
        }
        let liveSource = live ?? "(SELECT * FROM \(rebuilt) WHERE false)"
        // Rows as JSON, keyed; a row present on one side only is added or removed.
        let keyExpression = "jsonb_build_array(\(keys.map { "r.\($0)::text" }.joined(separator: ", ")))"
        let rowExpression = "jsonb_build_object(\(all.map { "'\($0)', r.\($0)::text" }.joined(separator: ", ")))"
        let liveRowExpression = "jsonb_build_object(\(all.map { "'\($0)', \(liveValues[$0]!)" }.joined(separator: ", ")))"
        let sql = """
            WITH l AS (SELECT \(keyExpression) AS k, \(liveRowExpression) AS v FROM \(liveSource) r),
                 n AS (SELECT \(keyExpression) AS k, \(rowExpression) AS v FROM \(rebuilt) r)
            SELECT coalesce(l.k, n.k)::text, l.v::text, n.v::text
            FROM l FULL OUTER JOIN n ON l.k = n.k
            WHERE l.v IS DISTINCT FROM n.v
            ORDER BY 1
            LIMIT 100000
            """
        var differences: [Difference] = []
        for try await (key, before, after) in try await connection.query(PostgresQuery(unsafeSQL: sql), logger: logger)
            .decode((String, String?, String?).self) {
            let beforeRow = try before.map(Self.row)
            let afterRow = try after.map(Self.row)
            let keyValues = try JSONSerialization.jsonObject(with: Data(key.utf8)) as? [Any] ?? []
            var keyMap: [String: String?] = [:]
            for (name, value) in zip(keys, keyValues) { keyMap[name] = value as? String }
            let change: Difference.Change = beforeRow == nil ? .added : afterRow == nil ? .removed : .changed
            differences.append(Difference(
                change: change, app: (keyMap["app"] ?? nil) ?? "", user: (keyMap["user_id"] ?? nil) ?? "",
                key: keyMap.filter { $0.key != "app" && $0.key != "user_id" }, before: beforeRow, after: afterRow
            ))
        }
        return differences
    }

    static func row(_ json: String) throws -> [String: String?] {
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any] ?? [:]
        var row: [String: String?] = [:]
        for (name, value) in object where name != "app" && name != "user_id" { row[name] = value as? String }
        return row
    }

    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
