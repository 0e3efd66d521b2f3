import Foundation

/// An event as the log holds it.
public struct RecordedEvent: Sendable, Hashable {
    /// Global order of the log. Gaps are appends that rolled back.
    public let position: Int64
    public let streamID: String
    /// 1 for the stream's first event, then without gaps.
    public let streamVersion: Int64
    public let eventID: UUID
    /// The stored type name, e.g. `PurchaseRecorded.v1`.
    public let type: String
    /// The payload as JSON text (PostgreSQL's normalised `jsonb` form).
    public let data: String
    public let metadata: String
    public let recordedAt: Date
    public let deduplicationKey: String?

    public init(
        position: Int64, streamID: String, streamVersion: Int64, eventID: UUID, type: String,
        data: String, metadata: String, recordedAt: Date, deduplicationKey: String?
    ) {
        self.position = position
        self.streamID = streamID
        self.streamVersion = streamVersion
        self.eventID = eventID
        self.type = type
        self.data = data
        self.metadata = metadata
        self.recordedAt = recordedAt
        self.deduplicationKey = deduplicationKey
    }
}
