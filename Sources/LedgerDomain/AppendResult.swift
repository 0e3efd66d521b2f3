import Foundation

/// What an append did with each event it was given, in the order they were given.
public struct AppendResult: Sendable, Hashable {
    /// The fate of one event.
    public enum Outcome: Sendable, Hashable {
        /// Appended now at this position and stream version.
        case appended(position: Int64, streamVersion: Int64)
        /// Its deduplication key was already recorded: this is the stored event.
        case duplicate(of: EventReference)
    }

    /// Where a stored event lives.
    public struct EventReference: Sendable, Hashable {
        public let eventID: UUID
        public let position: Int64
        public let streamID: String
        public let streamVersion: Int64

        public init(eventID: UUID, position: Int64, streamID: String, streamVersion: Int64) {
            self.eventID = eventID
            self.position = position
            self.streamID = streamID
            self.streamVersion = streamVersion
        }
    }

    public let streamID: String
    public let outcomes: [Outcome]
    /// When the events appended now were recorded (one instant for all of them; nil when every
    /// event was a duplicate), as the log keeps it: with it, a writer's state after its append is
    /// the fold of the log.
    public let recordedAt: Date?

    public init(streamID: String, outcomes: [Outcome], recordedAt: Date? = nil) {
        self.streamID = streamID
        self.outcomes = outcomes
        self.recordedAt = recordedAt
    }

    /// The highest log position this append reached: the new events' last position, or, when
    /// everything was a duplicate, the position of the latest stored original. A reader that waits
    /// for its projections to pass it reads its own write.
    public var position: Int64 {
        outcomes.map { outcome in
            switch outcome {
            case .appended(let position, _): position
            case .duplicate(let stored): stored.position
            }
        }.max() ?? 0
    }

    /// True when nothing new was written.
    public var isDuplicate: Bool {
        outcomes.allSatisfy { if case .duplicate = $0 { true } else { false } }
    }

    public var appendedCount: Int {
        outcomes.count { if case .appended = $0 { true } else { false } }
    }
}
