import LedgerDomain

/// The event log: append to a stream with an expected version, read a stream, read the log in order.
public protocol EventStore: Sendable {
    /// Appends `events` to `stream` atomically, skipping those whose deduplication key the stream
    /// has already recorded. Throws `StoreError.wrongExpectedVersion` when the stream moved on, and
    /// `StoreError.keyHeldByAnotherStream` (recording nothing) when another stream holds a key.
    ///
    /// With a `document`, what Apple sent that the events name is kept in the same transaction
    /// (as `DocumentArchive.keep` keeps it: once, never changed): both or neither, so a refused
    /// append keeps nothing and no fact names a document that is not kept.
    func append(_ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion, keeping document: AppStoreDocument?)
        async throws -> AppendResult

    /// The stream's events from `version` on, in version order.
    func readStream(_ stream: StreamID, fromVersion version: Int64, limit: Int) async throws -> [RecordedEvent]

    /// Committed events after `position`, in position order, never past a position whose
    /// predecessors might still commit (the gap guard).
    func readAll(after position: Int64, stream: StreamID?, limit: Int) async throws -> [RecordedEvent]

    /// Where each of these deduplication keys is recorded, for those that are.
    func recorded(_ keys: [DeduplicationKey]) async throws -> [DeduplicationKey: AppendResult.EventReference]

    /// The events of several streams after the given versions, none past log `position`, by
    /// stream id, each stream's in version order (streams with none are absent).
    func readStreams(_ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64) async throws -> [String: [RecordedEvent]]

    /// `readStreams(_:upToPosition:)` and `recorded(_:)` at once: what a command reads before it
    /// decides, in one statement where the store can.
    func readStreams(
        _ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64, lookingUp keys: [DeduplicationKey]
    ) async throws -> (events: [String: [RecordedEvent]], recorded: [DeduplicationKey: AppendResult.EventReference])
}

extension EventStore {
    /// One read after the other, for stores that cannot read both at once.
    public func readStreams(
        _ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64, lookingUp keys: [DeduplicationKey]
    ) async throws -> (events: [String: [RecordedEvent]], recorded: [DeduplicationKey: AppendResult.EventReference]) {
        (try await readStreams(streams, upToPosition: position), try await recorded(keys))
    }

    /// Appends `events`, keeping no document with them.
    public func append(_ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion) async throws -> AppendResult {
        try await append(events, to: stream, expecting: expected, keeping: nil)
    }

    /// One stream after another, for stores that cannot read them together.
    public func readStreams(_ streams: [(stream: StreamID, afterVersion: Int64)], upToPosition position: Int64) async throws -> [String: [RecordedEvent]] {
        var read: [String: [RecordedEvent]] = [:]
        for (stream, afterVersion) in streams {
            var next = afterVersion + 1
            while true {
                let page = try await readStream(stream, fromVersion: next, limit: 5_000)
                let wanted = page.filter { $0.position <= position }
                if !wanted.isEmpty { read[stream.rawValue, default: []] += wanted }
                guard page.count == 5_000, let last = page.last else { break }
                next = last.streamVersion + 1
            }
        }
        return read
    }
}
