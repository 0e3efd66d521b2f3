import Foundation
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Takes an anchor of the log: every stream's head and the log's head, read in one snapshot,
/// signed, and written as a file (`LogAnchorFile`).
public struct LogAnchorBuilder: Sendable {
    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Writes a signed anchor of the log as it is now to `output` and returns what was signed:
    /// every event committed when it is called, and what settled after them (appends running then
    /// are waited for, up to 10 s; past that the anchor stops below the oldest still running).
    ///
    /// The heads stream from the database into the file and the Merkle root, so memory grows only
    /// with the logarithm of the number of streams. The read-only transaction takes no transaction
    /// id, so however long it reads it holds back neither appends nor followers.
    /// `progress` is called every `progressEvery` heads.
    public func write(
        to output: FileHandle,
        signingWith key: AnchorSigningKey,
        progressEvery: Int = 100_000,
        progress: @Sendable (Int) -> Void = { _ in }
    ) async throws -> LogAnchorSummary {
        try await client.withConnection { connection in
            // Every event committed when the anchor was asked for is in it. The settled prefix can
            // fall short of them for an instant: the horizon counts a transaction that ended as it
            // was read as still running (see 0004). Such a snapshot is let go and another taken.
            let committed = try await connection.query("SELECT coalesce(max(\"position\"), 0) FROM ledger.events", logger: logger)
                .collect()[0].decode(Int64.self)
            let patience = ContinuousClock.now + .seconds(10)
            while true {
                // One snapshot for the log head, the count and every stream head, so they agree with
                // each other whatever is appended meanwhile.
                try await connection.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", logger: logger)
                do {
                    let head = try await settledHead(connection)
                    guard head.logHead >= committed || ContinuousClock.now >= patience else {
                        try await connection.query("ROLLBACK", logger: logger)
                        try await Task.sleep(for: .milliseconds(20))
                        continue
                    }
                    let summary = try await write(head, from: connection, to: output, key: key, progressEvery: progressEvery, progress: progress)
                    try await connection.query("COMMIT", logger: logger)
                    logger.debug("log anchored", metadata: [
                        "ledger.anchor.log_head": "\(summary.logHeadPosition)",
                        "ledger.anchor.streams": "\(summary.streamCount)",
                    ])
                    return summary
                } catch {
                    await connection.rollBackUnlessClosed(logger: logger)
                    throw error
                }
            }
        }
    }

    /// Writes the anchor to a new file at `path`, never an existing one, created readable and
    /// writable by its owner and readable by its group only (it lists every stream id, so every
    /// user id). The file is synced before this returns; on any failure nothing is left at `path`.
    public func write(
        toNewFile path: String,
        signingWith key: AnchorSigningKey,
        progressEvery: Int = 100_000,
        progress: @Sendable (Int) -> Void = { _ in }
    ) async throws -> LogAnchorSummary {
        let output = try AnchorFiles.openNew(at: path, mode: 0o640)
        do {
            let summary = try await write(to: output, signingWith: key, progressEvery: progressEvery, progress: progress)
            try output.synchronize()
            try output.close()
            return summary
        } catch {
            // Half an anchor is no anchor.
            try? output.close()
            unlink(path)
            throw error
        }
    }

    /// The anchored log is the settled prefix: events of transactions below the followers'
    /// horizon (see 0001 and 0004). An append still running when the snapshot was taken may hold a
    /// lower position than one already committed; it commits later with that position, and would
    /// otherwise look like an event slipped in below the anchored head. Positions go in transaction
    /// order, so the prefix is exactly the events at or below its highest position.
    private func settledHead(_ connection: PostgresConnection) async throws -> (createdAt: String, logHead: Int64, eventCount: Int64) {
        let head = try await connection.query(
            """
            SELECT to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'),
                   coalesce(max("position"), 0), count(*)
            FROM ledger.events WHERE transaction_id < (SELECT ledger.follow_horizon())
            """,
            logger: logger
        ).collect()
        return try head[0].decode((String, Int64, Int64).self)
    }

    private func write(
        _ head: (createdAt: String, logHead: Int64, eventCount: Int64), from connection: PostgresConnection, to output: FileHandle,
        key: AnchorSigningKey, progressEvery: Int, progress: @Sendable (Int) -> Void
    ) async throws -> LogAnchorSummary {
        let (createdAt, logHead, eventCount) = head
        var file = LogAnchorFileWriter(output: output, createdAt: createdAt, logHeadPosition: logHead, eventCount: eventCount, publicKey: key.publicKey)
        var root = MerkleRoot()
        var previous: String?
        // Stream ids in byte order (COLLATE "C"), the order the Merkle tree and the verifier's
        // lookups need whatever the database's own collation is.
        let rows = try await connection.query(
            """
            SELECT DISTINCT ON (stream_id COLLATE "C") stream_id, stream_version, hash
            FROM ledger.events WHERE "position" <= \(logHead)
            ORDER BY stream_id COLLATE "C", stream_version DESC
            """,
            logger: logger
        )
        for try await (stream, version, hash) in rows.decode((String, Int64, Data).self) {
            if let previous, !StreamHead.precedes(previous, stream) {
                throw LogAnchorError.output("the database returned stream '\(stream)' after '\(previous)', out of byte order: no anchor was written")
            }
            let streamHead = StreamHead(streamID: stream, version: version, hash: hash)
            root.append(leaf: streamHead.leafHash)
            try file.append(streamHead)
            previous = stream
            if root.leafCount % progressEvery == 0 { progress(root.leafCount) }
        }

        let summary = LogAnchorSummary(
            createdAt: createdAt, logHeadPosition: logHead, eventCount: eventCount,
            streamCount: Int64(root.leafCount), merkleRoot: root.value, publicKey: key.publicKey
        )
        try file.finish(summary: summary, signature: try key.signature(for: summary.signedBytes))
        return summary
    }
}
