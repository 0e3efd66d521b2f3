import Crypto
import Foundation
import Logging
import PostgresNIO

/// Recomputes every stream's hash chain and reports where it breaks.
///
/// Each event's hash is SHA-256 over the previous event's hash in its stream and the bytes of
/// `ledger.event_content(...)` for the event. A changed row fails its own check; a changed row
/// whose hash was recomputed fails its successor's; a removed row leaves a version gap.
/// What the chains cannot show (a stream's last events removed, a stream removed whole, a suffix
/// rewritten and rehashed) is found against an anchor taken earlier (`LogAnchor`), in the same pass.
public struct HashChainVerifier: Sendable {
    /// One place where the chain does not hold.
    public struct Break: Sendable, Hashable, CustomStringConvertible {
        public let streamID: String
        public let position: Int64
        public let streamVersion: Int64
        public let reason: String

        public var description: String {
            "stream '\(streamID)' at position \(position) (version \(streamVersion)): \(reason)"
        }
    }

    public struct Report: Sendable {
        public let eventsChecked: Int
        public let streamsChecked: Int
        /// The first break of each broken stream, lowest position first.
        public let breaks: [Break]
        /// The comparison with the anchor, when one was given.
        public let anchor: LogAnchorReport?

        public var isIntact: Bool { breaks.isEmpty && anchor?.isIntact != false }
        public var firstBreak: Break? { breaks.first }
    }

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Verifies the whole log, and compares it with `anchor` when one is given. `progress` is
    /// called every `progressEvery` events with (checked, total).
    public func verify(
        against anchor: LogAnchor? = nil,
        progressEvery: Int = 50_000,
        progress: @Sendable (Int, Int) -> Void = { _, _ in }
    ) async throws -> Report {
        var total = 0
        for try await count in try await client.query("SELECT count(*) FROM ledger.events", logger: logger).decode(Int.self) {
            total = count
        }
        let rows = try await client.query(
            """
            SELECT "position", stream_id, stream_version, hash,
                   ledger.event_content("position", stream_id, stream_version, event_id, event_type,
                                        data, metadata, recorded_at, dedup_key)
            FROM ledger.events ORDER BY stream_id, stream_version
            """,
            logger: logger
        )
        var checked = 0
        var streams = 0
        var breaks: [Break] = []
        var currentStream: String?
        var previousHash = Data()
        var previousVersion: Int64 = 0
        var streamBroken = false
        var comparison = anchor.map(LogAnchorComparison.init)
        for try await (position, stream, version, storedHash, content) in rows.decode(
            (Int64, String, Int64, Data, Data).self
        ) {
            if currentStream.map({ !StreamHead.same($0, stream) }) ?? true {
                currentStream = stream
                streams += 1
                previousHash = Data()
                previousVersion = 0
                streamBroken = false
            }
            var problem: String?
            if version != previousVersion + 1 {
                problem = previousVersion == 0
                    ? "the stream starts at version \(version) instead of 1: earlier events were removed"
                    : "version \(previousVersion + 1) is missing (found \(version) after \(previousVersion)): an event was removed"
            } else {
                var hasher = SHA256()
                hasher.update(data: previousHash)
                hasher.update(data: content)
                if Data(hasher.finalize()) != storedHash {
                    problem = "the event's content or hash does not match the chain: the row, or the one before it, was altered"
                }
            }
            if let problem, !streamBroken {
                streamBroken = true
                breaks.append(Break(streamID: stream, position: position, streamVersion: version, reason: problem))
            }
            // Carry on from the stored hash, so one altered row is reported once, not for the rest of the stream.
            previousHash = storedHash
            previousVersion = version
            comparison?.visit(stream: stream, version: version, position: position, hash: storedHash)
            checked += 1
            if checked % progressEvery == 0 { progress(checked, total) }
        }
        progress(checked, total)
        return Report(
            eventsChecked: checked,
            streamsChecked: streams,
            breaks: breaks.sorted { $0.position < $1.position },
            anchor: comparison?.finish()
        )
    }
}
