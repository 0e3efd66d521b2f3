import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import Metrics
import PostgresNIO

/// The event log in PostgreSQL: `ledger.events`, written only through `ledger.append()`.
public struct PostgresEventStore: EventStore {
    /// The channel `ledger.append` callers notify after a commit; followers listen on it.
    public static let notificationChannel = "ledger_events"

    let client: DatabasePool
    let logger: Logger
    let notifier = CommitNotifier()
    let metrics = AppendMetrics()
    /// How often a racing writer is retried before the conflict is reported.
    let maximumAttempts = 8

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Append

    public func append(
        _ events: [NewEvent],
        to stream: StreamID,
        expecting expected: ExpectedVersion,
        keeping document: AppStoreDocument?
    ) async throws -> AppendResult {
        let start = ContinuousClock.now
        defer { metrics.duration.record(duration: ContinuousClock.now - start) }
        do {
            let result = try await appendRetrying(events, to: stream, expecting: expected, keeping: document)
            metrics.record(result)
            return result
        } catch let error as StoreError where error.code == .wrongExpectedVersion {
            metrics.conflicts.increment()
            throw error
        }
    }

    /// `append` without its metrics: validates, then appends, retrying races and duplicate checks.
    private func appendRetrying(
        _ events: [NewEvent],
        to stream: StreamID,
        expecting expected: ExpectedVersion,
        keeping document: AppStoreDocument?
    ) async throws -> AppendResult {
        guard !events.isEmpty else { throw StoreError.invalidInput(LedgerInputError.emptyAppend.message) }
        var seenKeys = Set<DeduplicationKey>()
        for key in events.compactMap(\.deduplicationKey) where !seenKeys.insert(key).inserted {
            throw StoreError.invalidInput(LedgerInputError.repeatedDeduplicationKey(key.rawValue).message)
        }

        // Fast path first: the unique constraint on dedup_key finds duplicates for free. Only
        // when it reports one (or the version moved and a key might explain why) is the append
        // repeated with the explicit duplicate check.
        let hasKeys = events.contains { $0.deduplicationKey != nil }
        var checkDuplicates = false
        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await appendOnce(events, to: stream, expecting: expected, keeping: document, checkDuplicates: checkDuplicates)
            } catch let error as PSQLError {
                switch (error.ledgerSQLState, error.serverInfo?[.constraintName]) {
                case (.wrongExpectedVersion, _):
                    if hasKeys && !checkDuplicates {
                        // Perhaps a retried command whose events are already recorded.
                        checkDuplicates = true
                        continue
                    }
                    let actual = Int64(error.serverInfo?[.detail] ?? "") ?? -1
                    throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: expected.description, actual: actual)
                case (.uniqueViolation, "events_stream_version_key"):
                    // Another writer appended to the stream between our read and our insert.
                    guard expected == .any, attempt < maximumAttempts else {
                        let actual = try await currentVersion(of: stream)
                        throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: expected.description, actual: actual)
                    }
                    logger.debug("append raced another writer, retrying", metadata: ["ledger.stream": "\(stream)"])
                case (.uniqueViolation, "events_dedup_key_key") where attempt < maximumAttempts:
                    // The key is recorded (a concurrent append has committed it, or it was there).
                    checkDuplicates = true
                    logger.debug("append met a recorded deduplication key", metadata: ["ledger.stream": "\(stream)"])
                case (.keyHeldByAnotherStream, _):
                    throw StoreError.keyHeldByAnotherStream(stream: stream.rawValue, Self.heldElsewhere(error.serverInfo?[.detail]))
                case (.uniqueViolation, "events_event_id_key"):
                    throw StoreError.duplicateEventID(events.map(\.eventID.uuidString).joined(separator: ", "))
                case (.invalidTextRepresentation, _), (.invalidParameterValue, _), (.checkViolation, _):
                    throw StoreError.invalidInput("the event was refused by the database: \(error.serverInfo?[.message] ?? "invalid input")")
                default:
                    throw error
                }
            }
        }
    }

    private func appendOnce(
        _ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion, keeping document: AppStoreDocument?,
        checkDuplicates: Bool
    ) async throws -> AppendResult {
        let expectedVersion: Int64? = switch expected {
        case .any: nil
        case .noStream: 0
        case .exactly(let version): version
        }
        let ids = events.map(\.eventID)
        let types = events.map(\.type.stored)
        let data = events.map(\.data)
        let metadata = events.map(\.metadata)
        let keys = events.map { $0.deduplicationKey?.rawValue ?? "" }

        // One statement: atomic on its own, no BEGIN/COMMIT needed. But PostgreSQL commits a
        // statement of the extended protocol at the Sync after it, and postgres-nio reports the
        // statement done at its CommandComplete, before that commit: a crash in between answered
        // appends that were never recorded (two receipts per run of the twenty-crash test). The
        // statement after it on the same connection is answered only once the commit is done, so
        // the append counts as recorded only then (`query(_:thenConfirmCommit:)`).
        //
        // A document the events name is kept by the same statement: a refused append (a key
        // another stream holds, a stream that moved) keeps nothing, and one round trip does both.
        // Both statements are prepared on each connection (`AppendStatement`).
        let call = AppendStatement.Call(
            stream: stream.rawValue, expected: expectedVersion, ids: ids, types: types, data: data, metadata: metadata, keys: keys,
            checkDuplicates: checkDuplicates
        )
        let rows = if let document {
            try await client.execute(AppendKeepingStatement(call: call, document: document), thenConfirmCommit: true, logger: logger)
        } else {
            try await client.execute(AppendStatement(call: call), thenConfirmCommit: true, logger: logger)
        }
        var firstAppended: (position: Int64, version: Int64)?
        var recordedAt: Date?
        var duplicates: [String: AppendResult.EventReference] = [:]
        for row in rows {
            let (id, position, streamID, version, duplicate, key, recorded) = try row.decode(
                (UUID?, Int64, String, Int64, Bool, String?, Date).self
            )
            if duplicate, let id, let key {
                duplicates[key] = .init(eventID: id, position: position, streamID: streamID, streamVersion: version)
            } else {
                firstAppended = (position, version)
                recordedAt = recorded
            }
        }
        // New events took consecutive positions and versions, in the order they were given.
        var next = firstAppended
        let outcomes = try events.map { event -> AppendResult.Outcome in
            if let key = event.deduplicationKey?.rawValue, let stored = duplicates[key] {
                return .duplicate(of: stored)
            }
            guard let current = next else {
                throw StoreError.integrity("ledger.append reported no position for event \(event.eventID)")
            }
            next = (current.position + 1, current.version + 1)
            return .appended(position: current.position, streamVersion: current.version)
        }
        let result = AppendResult(streamID: stream.rawValue, outcomes: outcomes, recordedAt: recordedAt)
        if let last = next?.position { client.logReach.saw(last - 1) }
        if result.appendedCount > 0 {
            notifier.committed(client: client, logger: logger)
        }
        return result
    }

    /// The events of other streams that `ledger.append` names in the detail of its LW007 refusal.
    static func heldElsewhere(_ detail: String?) -> [DeduplicationKey: AppendResult.EventReference] {
        struct Held: Decodable {
            let key: String
            let position: Int64
            let streamId: String
            let streamVersion: Int64
            let eventId: UUID
        }
        guard let detail, let held = try? JSONDecoder().decode([Held].self, from: Data(detail.utf8)) else { return [:] }
        var found: [DeduplicationKey: AppendResult.EventReference] = [:]
        for event in held {
            guard let key = try? DeduplicationKey(rawValue: event.key) else { continue }
            found[key] = .init(eventID: event.eventId, position: event.position, streamID: event.streamId, streamVersion: event.streamVersion)
        }
        return found
    }

    /// Where each of these keys is recorded, for the keys that are.
    public func recorded(_ keys: [DeduplicationKey]) async throws -> [DeduplicationKey: AppendResult.EventReference] {
        guard !keys.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT dedup_key, event_id, "position", stream_id, stream_version FROM ledger.events
            WHERE dedup_key = ANY(\(keys.map(\.rawValue)))
            """,
            logger: logger
        )
        var found: [DeduplicationKey: AppendResult.EventReference] = [:]
        for try await (key, id, position, stream, version) in rows.decode((String, UUID, Int64, String, Int64).self) {
            found[try DeduplicationKey(rawValue: key)] = .init(eventID: id, position: position, streamID: stream, streamVersion: version)
        }
        return found
    }

    /// The stream's current version (0 when it has no event).
    public func currentVersion(of stream: StreamID) async throws -> Int64 {
        let rows = try await client.query(
            "SELECT coalesce(max(stream_version), 0) FROM ledger.events WHERE stream_id = \(stream.rawValue)",
            logger: logger
        )
        for try await version in rows.decode(Int64.self) { return version }
        return 0
    }

    // MARK: Read

    public func readStream(_ stream: StreamID, fromVersion version: Int64 = 1, limit: Int = 10_000) async throws -> [RecordedEvent] {
        try await Self.decode(client.query(
            """
            SELECT \(unescaped: Self.columns) FROM ledger.events
            WHERE stream_id = \(stream.rawValue) AND stream_version >= \(version)
            ORDER BY stream_version LIMIT \(limit)
            """,
            logger: logger
        ))
    }

    /// Several streams' events at once, each after its own version and none past log `position`,
    /// in one statement: the events of each stream in version order.
    public func readStreams(_ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64) async throws -> [String: [RecordedEvent]] {
        guard !streams.isEmpty else { return [:] }
        if let read = try await preparedRead(streams, upToPosition: position, lookingUp: []) { return read.events }
        let events = try await Self.decode(client.query(
            """
            SELECT e.* FROM \(streamsAfter: streams, upToPosition: position)
            ORDER BY e.stream_id, e.stream_version
            """,
            logger: logger
        ))
        if let last = events.map(\.position).max() { client.logReach.saw(last) }
        return Dictionary(grouping: events, by: \.streamID)
    }

    public func readStreams(
        _ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64, lookingUp keys: [DeduplicationKey]
    ) async throws -> (events: [String: [RecordedEvent]], recorded: [DeduplicationKey: AppendResult.EventReference]) {
        guard !keys.isEmpty else { return (try await readStreams(streams, upToPosition: position), [:]) }
        guard !streams.isEmpty else { return ([:], try await recorded(keys)) }
        if let read = try await preparedRead(streams, upToPosition: position, lookingUp: keys) { return read }
        // Part 1: the events recorded under the keys, their data and metadata left out.
        let rows = try await client.query(
            """
            SELECT 0 AS part, e.* FROM \(streamsAfter: streams, upToPosition: position)
            UNION ALL
            SELECT 1, "position", stream_id, stream_version, event_id, event_type, NULL, NULL, recorded_at, dedup_key
            FROM ledger.events WHERE dedup_key = ANY(\(keys.map(\.rawValue)))
            ORDER BY part, stream_id, stream_version
            """,
            logger: logger
        )
        return try await parts(of: rows)
    }

    /// A command's read (two streams, and the keys it looks up) by a prepared statement, once the
    /// log has reached the size from which its plan holds for any size (`LogReach`); nil before,
    /// or for another number of streams, or more keys than `PreparedStatements.keyBuckets` holds.
    private func preparedRead(
        _ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64, lookingUp keys: [DeduplicationKey]
    ) async throws -> (events: [String: [RecordedEvent]], recorded: [DeduplicationKey: AppendResult.EventReference])? {
        guard streams.count == 2, client.logReach.prepares,
              let bucket = keys.isEmpty ? 0 : PreparedStatements.bucket(for: keys.count),
              let statement = Self.commandReads[bucket]
        else { return nil }
        let arguments = [streams[0].stream.rawValue, streams[1].stream.rawValue, String(streams[0].afterVersion), String(streams[1].afterVersion),
                         String(position)] + PreparedStatements.padded(keys.map(\.rawValue), to: bucket)
        return try await parts(of: client.query(prepared: statement, arguments, logger: logger))
    }

    /// The rows of a command's read: part 0 the streams' events, part 1 the events recorded under
    /// the keys (their data and metadata left out).
    private func parts(
        of rows: some AsyncSequence<PostgresRow, any Error>
    ) async throws -> (events: [String: [RecordedEvent]], recorded: [DeduplicationKey: AppendResult.EventReference]) {
        var events: [String: [RecordedEvent]] = [:]
        var found: [DeduplicationKey: AppendResult.EventReference] = [:]
        var last: Int64 = 0
        for try await (part, position, stream, version, id, type, data, metadata, recordedAt, key) in rows.decode(
            (Int, Int64, String, Int64, UUID, String, String?, String?, Date, String?).self
        ) {
            last = max(last, position)
            if part == 0, let data, let metadata {
                events[stream, default: []].append(RecordedEvent(
                    position: position, streamID: stream, streamVersion: version, eventID: id, type: type,
                    data: data, metadata: metadata, recordedAt: recordedAt, deduplicationKey: key
                ))
            } else if part == 1, let key {
                found[try DeduplicationKey(rawValue: key)] = .init(eventID: id, position: position, streamID: stream, streamVersion: version)
            }
        }
        client.logReach.saw(last)
        return (events, found)
    }

    /// A command's read, prepared, by the number of keys it looks up (0 or a bucket): the events
    /// of streams $1 and $2 after versions $3 and $4, none past position $5, as part 0; with part
    /// 1, the events recorded under the keys $6… (data and metadata left out). Two streams as two
    /// arguments, not an array: PostgreSQL estimates an array's `unnest` at a hundred rows and
    /// would keep planning each call.
    ///
    /// Each stream's part is bounded above as well as below (`stream_version < bigint's maximum`,
    /// which no version reaches): the plan PostgreSQL keeps for every argument cannot know that
    /// the lower bound is near the stream's head, and estimates `stream_version > $3` alone at a
    /// third of the stream's rows; with a bound on each side it takes the pair as a narrow range,
    /// and reads by `events_stream_version_key` whatever the streams' lengths. With the lower bound
    /// alone, a log of a few long streams (the history benchmark's: three users of 10,000 events)
    /// had its kept plan walk `events_pkey` over every position up to $5 and filter: 25 ms a
    /// command instead of 0.2.
    static let commandReads: [Int: PreparedStatements.Statement] = {
        func streamPart(stream: String, after version: String) -> String {
            """
            SELECT 0 AS part, \(columns) FROM ledger.events
            WHERE stream_id = \(stream) AND stream_version > \(version) AND stream_version < \(Int64.max) AND "position" <= $5
            """
        }
        var statements: [Int: PreparedStatements.Statement] = [:]
        for bucket in [0] + PreparedStatements.keyBuckets {
            let byKeys = bucket == 0 ? "" : """
                UNION ALL
                SELECT 1, "position", stream_id, stream_version, event_id, event_type, NULL, NULL, recorded_at, dedup_key
                FROM ledger.events WHERE dedup_key = ANY(ARRAY[\(PreparedStatements.placeholders(from: 6, count: bucket))])
                """
            statements[bucket] = PreparedStatements.Statement(
                name: "ledger_command_read_\(bucket)",
                sql: """
                    \(streamPart(stream: "$1", after: "$3"))
                    UNION ALL
                    \(streamPart(stream: "$2", after: "$4"))
                    \(byKeys)
                    ORDER BY part, stream_id, stream_version
                    """,
                types: ["text", "text", "bigint", "bigint", "bigint"] + Array(repeating: "text", count: bucket)
            )
        }
        return statements
    }()

    public func readAll(after position: Int64, stream: StreamID? = nil, limit: Int = 1_000) async throws -> [RecordedEvent] {
        // Only rows of transactions older than every append still running in this database
        // (ledger.follow_horizon, evaluated once per statement): nothing earlier can still appear.
        if let stream {
            return try await Self.decode(client.query(
                """
                SELECT \(unescaped: Self.columns) FROM ledger.events
                WHERE "position" > \(position) AND stream_id = \(stream.rawValue)
                  AND transaction_id < (SELECT ledger.follow_horizon())
                ORDER BY "position" LIMIT \(limit)
                """,
                logger: logger
            ))
        }
        return try await Self.decode(client.query(
            """
            SELECT \(unescaped: Self.columns) FROM ledger.events
            WHERE "position" > \(position) AND transaction_id < (SELECT ledger.follow_horizon())
            ORDER BY "position" LIMIT \(limit)
            """,
            logger: logger
        ))
    }

    /// The events after `position` up to and including `settled`, a position a gap-safe read
    /// (`readAll`) has returned, such as a projection's checkpoint. Positions are handed out in
    /// transaction-id order, so every transaction holding a position up to `settled` has ended:
    /// the range is read without the followers' horizon, which a transaction ending in another
    /// database can hold back for a moment, and an empty page means the range is done.
    public func readSettled(after position: Int64, through settled: Int64, limit: Int = 1_000) async throws -> [RecordedEvent] {
        try await Self.decode(client.query(
            """
            SELECT \(unescaped: Self.columns) FROM ledger.events
            WHERE "position" > \(position) AND "position" <= \(settled)
            ORDER BY "position" LIMIT \(limit)
            """,
            logger: logger
        ))
    }

    /// The highest position committed so far (the log's head), or 0 for an empty log.
    public func headPosition() async throws -> Int64 {
        for try await head in try await client.query(
            "SELECT coalesce(max(\"position\"), 0) FROM ledger.events", logger: logger
        ).decode(Int64.self) {
            return head
        }
        return 0
    }

    static let columns = """
        "position", stream_id, stream_version, event_id, event_type, data::text, metadata::text, recorded_at, dedup_key
        """

    static func decode(_ rows: some AsyncSequence<PostgresRow, any Error>) async throws -> [RecordedEvent] {
        var events: [RecordedEvent] = []
        for try await (position, stream, version, id, type, data, metadata, recordedAt, key) in rows.decode(
            (Int64, String, Int64, UUID, String, String, String, Date, String?).self
        ) {
            events.append(RecordedEvent(
                position: position, streamID: stream, streamVersion: version, eventID: id, type: type,
                data: data, metadata: metadata, recordedAt: recordedAt, deduplicationKey: key
            ))
        }
        return events
    }
}

extension PostgresQuery.StringInterpolation {
    /// For a `FROM`: the events of several streams after their versions, none past `position`, as `e`.
    ///
    /// One index range per stream (LATERAL, kept apart by its ORDER BY): as a plain join, a log of
    /// few long streams made PostgreSQL hash the whole table for every read (12 ms against 0.5 ms
    /// at 30,000 events). Planned for each read: a command's read of two streams is prepared
    /// instead once the log is large enough (`commandReads`, `LogReach`).
    mutating func appendInterpolation(streamsAfter streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64) {
        appendLiteral("unnest(")
        appendInterpolation(streams.map(\.stream.rawValue))
        appendLiteral("::text[], ")
        appendInterpolation(streams.map(\.afterVersion))
        appendLiteral("::bigint[]) AS wanted(wanted_stream, after_version) CROSS JOIN LATERAL (SELECT ")
        appendLiteral(PostgresEventStore.columns)
        appendLiteral(" FROM ledger.events WHERE stream_id = wanted.wanted_stream AND stream_version > wanted.after_version AND \"position\" <= ")
        appendInterpolation(position)
        appendLiteral(" ORDER BY stream_version) e")
    }
}
