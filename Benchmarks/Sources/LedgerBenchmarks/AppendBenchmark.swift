import AppStore
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import Logging
import PostgresNIO

/// Measures `ledger.append` against plain INSERTs of the same rows, in the same run and database.
///
/// Two baselines: a table with the same columns and a primary key, nothing else; and one with the
/// same indexes as `ledger.events` (copied from it, so they stay the same as migrations change
/// them). What the indexes cost reads from the second against the first; what the log costs beyond
/// them (deduplication, expected versions, the hash chain, the gap guard, the client's commit
/// confirmation and notifications) from the ledger against the second.
public struct AppendBenchmark: Sendable {
    public struct Options: Sendable {
        public var concurrency: Int
        public var streams: Int
        public var events: Int
        public var batch: Int

        public init(concurrency: Int, streams: Int, events: Int, batch: Int) {
            self.concurrency = concurrency
            self.streams = streams
            self.events = events
            self.batch = batch
        }
    }

    /// One side of the comparison.
    public struct Measurement: Sendable {
        public let events: Int
        public let seconds: Double
        /// Latency of one append (one batch), in milliseconds.
        public let p50: Double
        public let p99: Double
        /// The CPU each measured process used meanwhile (empty without a meter).
        public var cpu: [CPUMeter.Use] = []

        public var eventsPerSecond: Double { Double(events) / seconds }
    }

    public struct Result: Sendable {
        public let ledger: Measurement
        /// The raw INSERT into a table with a primary key only.
        public let baseline: Measurement
        /// The raw INSERT into a table indexed as `ledger.events` is.
        public let indexed: Measurement
        public var ratio: Double { ledger.eventsPerSecond / baseline.eventsPerSecond }
        public var indexedRatio: Double { ledger.eventsPerSecond / indexed.eventsPerSecond }
    }

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Both sides, each with the CPU `cpu`'s processes used while it ran when a meter is given.
    public func run(_ options: Options, cpu: CPUMeter? = nil) async throws -> Result {
        guard options.concurrency >= 1, options.streams >= 1, options.events >= 1, options.batch >= 1 else {
            throw StoreError.invalidInput("an append benchmark needs at least 1 writer, 1 stream, 1 event and 1 event per batch")
        }
        try await prepareBaseline()
        let work = try Self.plan(options)
        let store = PostgresEventStore(client: client, logger: logger)
        try await warmUp(store, concurrency: options.concurrency)
        let ledger = try await measure(work, cpu: cpu) { task in
            var versions: [Int: Int64] = [:]
            let shared = options.streams < options.concurrency
            return { batch in
                let stream = try StreamID("bench/\(batch.stream)")
                let expected: ExpectedVersion = shared ? .any : .exactly(versions[batch.stream, default: 0])
                let result = try await store.append(batch.events, to: stream, expecting: expected)
                if case .appended(_, let version)? = result.outcomes.last { versions[batch.stream] = version }
            }
        }
        let baseline = try await measure(work, cpu: cpu) { _ in
            { batch in try await self.insertBaseline(batch, into: BareTable.self) }
        }
        let indexed = try await measure(work, cpu: cpu) { _ in
            { batch in try await self.insertBaseline(batch, into: IndexedTable.self) }
        }
        return Result(ledger: ledger, baseline: baseline, indexed: indexed)
    }

    // MARK: Workload

    struct Row: Sendable {
        let eventID: UUID
        let key: String
        let data: String
        let metadata: String
    }

    struct Batch: Sendable {
        let stream: Int
        let rows: [Row]
        /// The rows as the ledger's events, made before the clock starts, as the raw side's rows
        /// are: the benchmark times the append, not the checking of JSON a caller wrote by hand.
        let events: [NewEvent]

        init(stream: Int, rows: [Row]) throws {
            self.stream = stream
            self.rows = rows
            self.events = try rows.map { row in
                try NewEvent(
                    eventID: row.eventID, type: EventTypeName(stored: "PurchaseRecorded.v1"), data: row.data,
                    metadata: row.metadata, deduplicationKey: DeduplicationKey(rawValue: row.key)
                )
            }
        }
    }

    /// Batches per task; task t writes the streams s with s % concurrency == t when there are
    /// enough streams, so writers do not contend for one stream unless asked to.
    static func plan(_ options: Options) throws -> [[Batch]] {
        var tasks = Array(repeating: [Batch](), count: options.concurrency)
        var next = 0
        var batchIndex = 0
        while next < options.events {
            let task = batchIndex % options.concurrency
            let perTaskStreams = max(1, options.streams / options.concurrency)
            let stream = options.streams >= options.concurrency
                ? task + options.concurrency * ((batchIndex / options.concurrency) % perTaskStreams)
                : batchIndex % options.streams
            let count = min(options.batch, options.events - next)
            let rows = (0..<count).map { offset in Self.syntheticRow(next + offset) }
            tasks[task].append(try Batch(stream: stream, rows: rows))
            next += count
            batchIndex += 1
        }
        return tasks
    }

    /// A purchase-like event of about 400 bytes of JSON.
    static func syntheticRow(_ index: Int) -> Row {
        let transactionID = String(1_000_000_000_000 + index)
        let eventID = UUID()
        let data = """
            {"transactionId":"\(transactionID)","originalTransactionId":"\(transactionID)",\
            "productId":"com.example.app.coins.pack\(index % 5)","productType":"consumable","quantity":\(1 + index % 3),\
            "purchaseDate":"2026-11-21T10:\(String(format: "%02d", index % 60)):00Z","environment":"production",\
            "deviceId":"device-\(index % 997)","price":"0.99","currency":"USD",\
            "receiptHash":"\(String(repeating: String(format: "%08x", UInt32(truncatingIfNeeded: index &* 2_654_435_761)), count: 8))"}
            """
        let metadata = #"{"requestId":"\#(eventID.uuidString)","apiKeyId":"bench","source":"ledger-bench append"}"#
        return Row(eventID: eventID, key: "appstore/com.example.app/production/payment/\(transactionID)", data: data, metadata: metadata)
    }

    private func measure(
        _ work: [[Batch]], cpu: CPUMeter?,
        makeWriter: @escaping @Sendable (Int) -> (Batch) async throws -> Void
    ) async throws -> Measurement {
        let before = cpu?.sample()
        let clock = ContinuousClock()
        let start = clock.now
        let latencies = try await withThrowingTaskGroup(of: [Double].self) { group in
            for (task, batches) in work.enumerated() {
                group.addTask {
                    let write = makeWriter(task)
                    var latencies: [Double] = []
                    latencies.reserveCapacity(batches.count)
                    for batch in batches {
                        let started = clock.now
                        try await write(batch)
                        let elapsed = clock.now - started
                        latencies.append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
                    }
                    return latencies
                }
            }
            var all: [Double] = []
            for try await part in group { all += part }
            return all.sorted()
        }
        let elapsed = clock.now - start
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        func percentile(_ p: Double) -> Double {
            latencies.isEmpty ? 0 : latencies[min(latencies.count - 1, Int(Double(latencies.count) * p))]
        }
        var measurement = Measurement(
            events: work.reduce(0) { $0 + $1.reduce(0) { $0 + $1.rows.count } },
            seconds: seconds, p50: percentile(0.5), p99: percentile(0.99)
        )
        if let cpu, let before { measurement.cpu = cpu.used(since: before) }
        return measurement
    }

    /// Opens every connection and compiles the append function in each session, so neither side
    /// pays for connection set-up inside its measurement.
    private func warmUp(_ store: PostgresEventStore, concurrency: Int) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for writer in 0..<concurrency {
                group.addTask {
                    for round in 0..<3 {
                        let event = try NewEvent(
                            type: EventTypeName(stored: "BenchmarkWarmedUp.v1"), data: #"{"round":\#(round)}"#
                        )
                        _ = try await store.append([event], to: StreamID("bench-warm-up/\(writer)"), expecting: .any)
                        try await client.query("SELECT 1 FROM ledger_bench.raw_events LIMIT 1", logger: logger)
                        try await client.query("SELECT 1 FROM ledger_bench.raw_events_indexed LIMIT 1", logger: logger)
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    // MARK: Baseline

    private func prepareBaseline() async throws {
        try await client.query("CREATE SCHEMA IF NOT EXISTS ledger_bench", logger: logger)
        try await client.query("DROP TABLE IF EXISTS ledger_bench.raw_events, ledger_bench.raw_events_indexed", logger: logger)
        try await client.query("DROP SEQUENCE IF EXISTS ledger_bench.raw_positions, ledger_bench.raw_versions", logger: logger)
        try await client.query(
            """
            CREATE TABLE ledger_bench.raw_events (
                position bigserial PRIMARY KEY, stream_id text, stream_version bigint DEFAULT 1, event_id uuid,
                event_type text, data jsonb, metadata jsonb, recorded_at timestamptz DEFAULT now(),
                dedup_key text, transaction_id xid8 DEFAULT pg_current_xact_id(), hash bytea
            )
            """,
            logger: logger
        )
        // Every index of ledger.events (unique and expression ones alike), its columns and
        // defaults; versions from a sequence, so (stream_id, stream_version) stays unique.
        try await client.query("CREATE SEQUENCE ledger_bench.raw_positions", logger: logger)
        try await client.query("CREATE SEQUENCE ledger_bench.raw_versions", logger: logger)
        try await client.query(
            "CREATE TABLE ledger_bench.raw_events_indexed (LIKE ledger.events INCLUDING DEFAULTS INCLUDING INDEXES)", logger: logger
        )
        try await client.query(
            """
            ALTER TABLE ledger_bench.raw_events_indexed
                ALTER "position" SET DEFAULT nextval('ledger_bench.raw_positions'),
                ALTER stream_version SET DEFAULT nextval('ledger_bench.raw_versions'),
                ALTER recorded_at SET DEFAULT now(),
                ALTER transaction_id SET DEFAULT pg_current_xact_id()
            """,
            logger: logger
        )
    }

    /// The baselines store a 32-byte hash too, so every table holds the same bytes per row. Prepared
    /// once per connection and answered once committed, as the ledger's append is
    /// (`AppendStatement`, `thenConfirmCommit`), so that both sides pay the same for parsing,
    /// planning and waiting for the commit.
    private func insertBaseline<Table: RawTable>(_ batch: Batch, into table: Table.Type) async throws {
        let rows = RawRows(
            streams: Array(repeating: "bench/\(batch.stream)", count: batch.rows.count), ids: batch.rows.map(\.eventID),
            data: batch.rows.map(\.data), metadata: batch.rows.map(\.metadata), keys: batch.rows.map(\.key)
        )
        _ = try await client.execute(RawInsert<Table>(rows: rows), thenConfirmCommit: true, logger: logger)
    }
}

/// The rows of a baseline INSERT, as its statement binds them.
struct RawRows: Sendable {
    let streams: [String]
    let ids: [UUID]
    let data: [String]
    let metadata: [String]
    let keys: [String]

    static let types: [PostgresDataType] = [.textArray, .uuidArray, .textArray, .textArray, .textArray]

    static func insert(into table: String) -> String {
        """
        INSERT INTO ledger_bench.\(table) (stream_id, event_id, event_type, data, metadata, dedup_key, hash)
        SELECT s, i, 'PurchaseRecorded.v1', d::jsonb, m::jsonb, k, decode(repeat('ab', 32), 'hex')
        FROM unnest($1, $2, $3, $4, $5) AS u(s, i, d, m, k)
        """
    }

    func bindings() -> PostgresBindings {
        var bindings = PostgresBindings(capacity: 5)
        bindings.append(streams)
        bindings.append(ids)
        bindings.append(data)
        bindings.append(metadata)
        bindings.append(keys)
        return bindings
    }
}

/// A baseline table: where `RawInsert` writes (postgres-nio takes a prepared statement's name
/// and SQL from its type, so each table is a type).
protocol RawTable: Sendable {
    static var table: String { get }
}

/// The bare baseline: the log's columns, the primary key only.
enum BareTable: RawTable { static let table = "raw_events" }

/// The baseline with the log's unique indexes.
enum IndexedTable: RawTable { static let table = "raw_events_indexed" }

/// A baseline INSERT of `rows` into `Table`, prepared once per connection.
struct RawInsert<Table: RawTable>: PostgresPreparedStatement {
    typealias Row = PostgresRow
    static var name: String { "ledger_bench_insert_\(Table.table)" }
    static var sql: String { RawRows.insert(into: Table.table) }
    static var bindingDataTypes: [PostgresDataType] { RawRows.types }
    let rows: RawRows
    func makeBindings() -> PostgresBindings { rows.bindings() }
    func decodeRow(_ row: PostgresRow) -> PostgresRow { row }
}
