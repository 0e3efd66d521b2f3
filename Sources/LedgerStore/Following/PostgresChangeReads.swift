import LedgerApplication
import Logging
import PostgresNIO

/// Reads `ledger.changes`, which `ChangeWriter` fills in the leading server.
public struct PostgresChangeReads: ChangeReads {
    let client: DatabasePool
    /// The writer's announcements, heard by this server's `ChangeFeed`; nil polls once a second.
    let signal: FeedSignal?
    let logger: Logger

    public init(client: DatabasePool, signal: FeedSignal?, logger: Logger) {
        self.client = client
        self.signal = signal
        self.logger = logger
    }

    /// One statement reads the writer's position and the rows up to it, so nothing written with a
    /// position the page reports can be missing from it: the writer commits its rows and its
    /// position together. A page cut inside one position's changes is completed with the rest
    /// of them.
    public func changes(app: String, after cursor: ChangeCursor, limit: Int) async throws -> ChangePage {
        let position = cursor.position
        var changes: [ChangePage.Change] = []
        changes.reserveCapacity(limit)
        var written: Int64 = 0
        try await client.forEachRow(
            """
            SELECT w.position, c.position, c.seq, c.body FROM ledger.change_writer w
            LEFT JOIN LATERAL (
                SELECT position, seq, body FROM ledger.changes
                WHERE app = \(app) AND (position, seq) > (\(position), \(cursor.seqBound)) AND position <= w.position
                ORDER BY position, seq LIMIT \(limit)
            ) c ON true
            """,
            logger: logger
        ) { row in
            let (through, at, seq, body) = try row.decode((Int64, Int64?, Int32?, String?).self)
            written = through
            if let at, let seq, let body { changes.append(.init(position: at, seq: Int(seq), body: body)) }
        }
        guard changes.count >= limit, let last = changes.last else {
            return ChangePage(changes: changes, position: max(position, written), more: false)
        }
        try await client.forEachRow(
            """
            SELECT seq, body FROM ledger.changes WHERE app = \(app) AND position = \(last.position) AND seq > \(Int32(last.seq))
            ORDER BY seq
            """,
            logger: logger
        ) { row in
            let (seq, body) = try row.decode((Int32, String).self)
            changes.append(.init(position: last.position, seq: Int(seq), body: body))
        }
        return ChangePage(changes: changes, position: last.position, more: true)
    }

    public func waitForChanges(after position: Int64, atMost timeout: Duration) async {
        if let signal {
            await signal.wait(after: position, atMost: timeout)
        } else {
            try? await Task.sleep(for: timeout)
        }
    }
}
