import Foundation

/// A stream that no longer holds what an anchor recorded of it.
public struct LogAnchorFinding: Sendable, Hashable, CustomStringConvertible {
    public enum Kind: Sendable, Hashable {
        /// The stream has no events at all now.
        case deleted
        /// The stream now ends before the anchored version: its last events were removed.
        case truncated(currentVersion: Int64)
        /// The event at the anchored version has another hash: it, or an event before it, was
        /// rewritten, and the chain recomputed from there.
        case rewritten(position: Int64, currentHash: Data)
        /// The stream goes on past the anchored version, but the event at that version is gone.
        case anchoredEventRemoved
    }

    public let streamID: String
    /// The stream's head when anchored.
    public let anchored: StreamHead
    public let kind: Kind

    public var description: String {
        let anchoredAt = "anchored at version \(anchored.version)"
        return switch kind {
        case .deleted:
            "stream '\(streamID)' was DELETED: \(anchoredAt), it has no events now"
        case .truncated(let current):
            "stream '\(streamID)' was TRUNCATED: \(anchoredAt), it now ends at version \(current) (\(anchored.version - current) \(anchored.version - current == 1 ? "event" : "events") removed)"
        case .rewritten(let position, let hash):
            "stream '\(streamID)' was REWRITTEN: its event at version \(anchored.version) (position \(position)) now has hash "
                + "\(Hex.encode(hash)), anchored \(Hex.encode(anchored.hash)); it or an earlier event was changed and the hashes recomputed"
        case .anchoredEventRemoved:
            "stream '\(streamID)' LOST its anchored event: \(anchoredAt), that version is missing now though later ones exist"
        }
    }
}

/// What comparing the log with an anchor found.
public struct LogAnchorReport: Sendable {
    public let anchor: LogAnchorSummary
    public let trust: LogAnchor.Trust
    /// Every stream that changed since the anchor, by stream id.
    public let findings: [LogAnchorFinding]
    /// The events now in the log at or below the anchored log head; the anchor counted
    /// `anchor.eventCount`. Events appended since the anchor are all above it.
    public let eventsAtOrBelowAnchoredHead: Int64

    /// Streams present at the anchor and still present now.
    public let streamsMatched: Int

    public var isIntact: Bool { findings.isEmpty && eventsAtOrBelowAnchoredHead == anchor.eventCount }

    /// What the difference in event counts means, or nil when there is none.
    public var eventCountFinding: String? {
        let difference = eventsAtOrBelowAnchoredHead - anchor.eventCount
        if difference < 0 {
            return "\(-difference) of the \(anchor.eventCount) events at or below the anchored log head (position "
                + "\(anchor.logHeadPosition)) are MISSING: the log holds \(eventsAtOrBelowAnchoredHead) of them now"
        }
        if difference > 0 {
            return "\(difference) events at or below the anchored log head (position \(anchor.logHeadPosition)) were "
                + "ADDED after the anchor was taken: the log holds \(eventsAtOrBelowAnchoredHead), the anchor counted "
                + "\(anchor.eventCount); new events can only take positions above it"
        }
        return nil
    }
}
