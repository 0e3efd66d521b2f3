import Foundation
import LedgerDomain
import Logging
import PostgresNIO

/// The event log in PostgreSQL: `ledger.events`, written only through `ledger.append()`.
public struct PostgresEventStore: EventStore {
    /// The channel `ledger.append` callers notify after a commit; followers listen on it.
    public static let notificationChannel = "ledger_events"

    let client: PostgresClient
    let logger: Logger
    /// How often a racing writer is retried before the conflict is reported.
    let maximumAttempts = 8

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    // MARK: Append

    public func append(
        _ events: [NewEvent],
        to stream: StreamID,
        expecting expected: ExpectedVersion
    ) async throws -> AppendResult {
        guard !events.isEmpty else { throw StoreError.invalidInput(LedgerInputError.emptyAppend.message) }
        var seenKeys = Set<DeduplicationKey>()
        for key in events.compactMap(\.deduplicationKey) where !seenKeys.insert(key).inserted {
            throw StoreError.invalidInput(LedgerInputError.repeatedDeduplicationKey(key.rawValue).message)
        }

        var attempt = 0
        while true {
            attempt += 1
            do {
                return try await appendOnce(events, to: stream, expecting: expected)
            } catch let error as PSQLError {
                switch (error.sqlState, error.serverInfo?[.constraintName]) {
                case ("LW001", _):
                    let actual = Int64(error.serverInfo?[.detail] ?? "") ?? -1
                    throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: expected.description, actual: actual)
                case ("23505", "events_stream_version_key"):
                    // Another writer appended to the stream between our read and our insert.
                    guard expected == .any, attempt < maximumAttempts else {
                        let actual = try await currentVersion(of: stream)
                        throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: expected.description, actual: actual)
                    }
                    logger.debug("append raced another writer, retrying", metadata: ["ledger.stream": "\(stream)"])
                case ("23505", "events_dedup_key_key") where attempt < maximumAttempts:
                    // A concurrent append recorded the same key and has committed: the next attempt sees it.
                    logger.debug("append raced a duplicate, retrying", metadata: ["ledger.stream": "\(stream)"])
                case ("23505", "events_event_id_key"):
                    throw StoreError.duplicateEventID(events.map(\.eventID.uuidString).joined(separator: ", "))
                case ("22P02", _), ("22023", _):
                    throw StoreError.invalidInput("the event payload was refused by the database: \(error.serverInfo?[.message] ?? "invalid input")")
                default:
                    throw error
                }
            }
        }
    }

    private func appendOnce(_ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion) async throws -> AppendResult {
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

        return try await client.withConnection { connection in
            let rows = try await connection.transaction(logger: logger) { connection in
                try await connection.query(
                    """
                    SELECT event_id, "position", stream_id, stream_version, duplicate, dedup_key
                    FROM ledger.append(\(stream.rawValue), \(expectedVersion), \(ids), \(types), \(data), \(metadata),
                                       array_replace(\(keys)::text[], '', NULL))
                    """,
                    logger: logger
                ).collect()
            }
            var appended: [UUID: (Int64, Int64)] = [:]
            var duplicates: [String: AppendResult.EventReference] = [:]
            for row in rows {
                let (id, position, streamID, version, duplicate, key) = try row.decode(
                    (UUID, Int64, String, Int64, Bool, String?).self
                )
                if duplicate, let key {
                    duplicates[key] = .init(eventID: id, position: position, streamID: streamID, streamVersion: version)
                } else {
                    appended[id] = (position, version)
                }
            }
            let outcomes = try events.map { event -> AppendResult.Outcome in
                if let key = event.deduplicationKey?.rawValue, let stored = duplicates[key] {
                    return .duplicate(of: stored)
                }
                guard let (position, version) = appended[event.eventID] else {
                    throw StoreError.integrity("ledger.append returned no row for event \(event.eventID)")
                }
                return .appended(position: position, streamVersion: version)
            }
            let result = AppendResult(streamID: stream.rawValue, outcomes: outcomes)
            if result.appendedCount > 0 {
                // After the commit, so that a woken follower finds the rows. A lost notification
                // only delays followers until their next poll.
                _ = try? await connection.query(
                    "SELECT pg_notify(\(Self.notificationChannel), \(String(result.position)))", logger: logger
                )
            }
            return result
        }
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

    public func readAll(after position: Int64, stream: StreamID? = nil, limit: Int = 1_000) async throws -> [RecordedEvent] {
        // Only rows of transactions older than every running one: nothing earlier can still appear.
        if let stream {
            return try await Self.decode(client.query(
                """
                SELECT \(unescaped: Self.columns) FROM ledger.events
                WHERE "position" > \(position) AND stream_id = \(stream.rawValue)
                  AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
                ORDER BY "position" LIMIT \(limit)
                """,
                logger: logger
            ))
        }
        return try await Self.decode(client.query(
            """
            SELECT \(unescaped: Self.columns) FROM ledger.events
            WHERE "position" > \(position) AND transaction_id < pg_snapshot_xmin(pg_current_snapshot())
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

    static func decode(_ rows: PostgresRowSequence) async throws -> [RecordedEvent] {
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
