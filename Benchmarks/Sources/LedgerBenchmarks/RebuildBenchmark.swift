import AppStore
import Foundation
import LedgerDomain
import LedgerProjections
import LedgerStore
import Logging
import NIOCore
import PostgresNIO

/// `projections rebuild --all` against a raw baseline in the same run: an ordered SELECT scan of
/// the whole log plus a COPY of as many rows into an unindexed table.
public struct RebuildBenchmark: Sendable {
    public struct Result: Sendable {
        public let events: Int
        public let baselineSeconds: Double
        public let rebuildSeconds: Double
        public var baselineRate: Double { Double(events) / baselineSeconds }
        public var rebuildRate: Double { Double(events) / rebuildSeconds }
        public var ratio: Double { rebuildRate / baselineRate }
    }

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func run(progress: @escaping @Sendable (ProjectionRebuilder.Progress) -> Void = { _ in }) async throws -> Result {
        let baselineStart = ContinuousClock.now
        let events = try await baseline()
        let baselineSeconds = ProjectionRebuilder.seconds(.now - baselineStart)

        let rebuildStart = ContinuousClock.now
        _ = try await ProjectionRebuilder(client: client, logger: logger).rebuildAll(Projections.all, progress: progress)
        return Result(events: events, baselineSeconds: baselineSeconds, rebuildSeconds: ProjectionRebuilder.seconds(.now - rebuildStart))
    }

    /// Scans the log in position order and copies one row per event into a scratch table.
    private func baseline() async throws -> Int {
        try await client.withConnection { connection in
            try await connection.query("CREATE SCHEMA IF NOT EXISTS ledger_bench", logger: logger)
            try await connection.query("DROP TABLE IF EXISTS ledger_bench.rebuild_rows", logger: logger)
            try await connection.query(
                "CREATE TABLE ledger_bench.rebuild_rows (position bigint, stream_id text, event_type text, data text, recorded_at timestamptz)",
                logger: logger
            )
            var rows: [(Int64, String, String, String, Date)] = []
            for try await row in try await connection.query(
                "SELECT position, stream_id, event_type, data::text, recorded_at FROM ledger.events ORDER BY position",
                logger: logger
            ).decode((Int64, String, String, String, Date).self) {
                rows.append(row)
            }
            try await connection.query("SET search_path = ledger_bench", logger: logger)
            try await connection.copyFrom(
                table: "rebuild_rows", columns: ["position", "stream_id", "event_type", "data", "recorded_at"], logger: logger
            ) { writer in
                var buffer = ByteBuffer()
                for (position, stream, type, data, recorded) in rows {
                    buffer.writeString(CopyText.line([String(position), stream, type, data, LedgerJSON.formatTimestamp(recorded)]))
                    if buffer.readableBytes > 1 << 18 {
                        try await writer.write(buffer)
                        buffer.clear()
                    }
                }
                if buffer.readableBytes > 0 { try await writer.write(buffer) }
            }
            try await connection.query("RESET search_path", logger: logger)
            try await connection.query("DROP TABLE ledger_bench.rebuild_rows", logger: logger)
            return rows.count
        }
    }
}

