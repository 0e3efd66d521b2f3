import Foundation

/// Compares the log with an anchor as the hash-chain verifier reads it, event by event, a stream
/// at a time, so checking an anchor costs no second pass over the log.
///
/// Each stream is looked up in the anchor once (a binary search); every anchored stream never
/// met was deleted. Streams the anchor does not know are new, and fine.
struct LogAnchorComparison {
    private let anchor: LogAnchor
    private var met: [Bool]
    private var findings: [LogAnchorFinding] = []
    private var eventsAtOrBelowHead: Int64 = 0

    /// The stream being read: its place in the anchor, its highest version so far, and whether
    /// the event at the anchored version has been seen.
    private var stream: String?
    private var anchoredIndex: Int?
    private var highestVersion: Int64 = 0
    private var sawAnchoredVersion = false

    init(anchor: LogAnchor) {
        self.anchor = anchor
        self.met = Array(repeating: false, count: anchor.heads.count)
    }

    /// One event of the log. Events of a stream come together, in any order of streams.
    mutating func visit(stream id: String, version: Int64, position: Int64, hash: Data) {
        if stream == nil || !StreamHead.same(stream!, id) {
            closeStream()
            stream = id
            anchoredIndex = anchor.index(of: id)
            highestVersion = 0
            sawAnchoredVersion = false
            if let anchoredIndex { met[anchoredIndex] = true }
        }
        if position <= anchor.summary.logHeadPosition { eventsAtOrBelowHead += 1 }
        highestVersion = max(highestVersion, version)
        guard let anchoredIndex else { return }
        let anchored = anchor.heads[anchoredIndex]
        if version == anchored.version {
            sawAnchoredVersion = true
            if hash != anchored.hash {
                findings.append(LogAnchorFinding(streamID: id, anchored: anchored, kind: .rewritten(position: position, currentHash: hash)))
            }
        }
    }

    /// The findings, once every event of the log has been visited.
    mutating func finish() -> LogAnchorReport {
        closeStream()
        stream = nil
        for (index, head) in anchor.heads.enumerated() where !met[index] {
            findings.append(LogAnchorFinding(streamID: head.streamID, anchored: head, kind: .deleted))
        }
        return LogAnchorReport(
            anchor: anchor.summary,
            trust: anchor.trust,
            findings: findings.sorted { StreamHead.precedes($0.streamID, $1.streamID) },
            eventsAtOrBelowAnchoredHead: eventsAtOrBelowHead,
            streamsMatched: met.lazy.filter { $0 }.count
        )
    }

    private mutating func closeStream() {
        guard let stream, let anchoredIndex, !sawAnchoredVersion else { return }
        let anchored = anchor.heads[anchoredIndex]
        let kind: LogAnchorFinding.Kind = highestVersion < anchored.version
            ? .truncated(currentVersion: highestVersion)
            : .anchoredEventRemoved
        findings.append(LogAnchorFinding(streamID: stream, anchored: anchored, kind: kind))
    }
}
