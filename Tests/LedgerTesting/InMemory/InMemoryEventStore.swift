import Foundation
import LedgerApplication
import LedgerDomain

/// The event store's contract held in memory, for application tests that need no database: one
/// log in position order, versions per stream, expected-version checks and deduplication keys
/// that record a fact once across every stream (an append meeting another stream's key is
/// refused whole), as `PostgresEventStore` keeps them.
public actor InMemoryEventStore: EventStore {
    private var log: [RecordedEvent] = []
    private var keys: [String: AppendResult.EventReference] = [:]
    /// Runs before each append is judged: a test can write in between, as a concurrent writer would.
    private var beforeAppend: (@Sendable (InMemoryEventStore) async throws -> Void)?

    /// Where appends keep the documents their events name.
    public nonisolated let archive: InMemoryDocumentArchive

    public init(archive: InMemoryDocumentArchive = InMemoryDocumentArchive()) {
        self.archive = archive
    }

    public func setBeforeAppend(_ hook: (@Sendable (InMemoryEventStore) async throws -> Void)?) {
        beforeAppend = hook
    }

    public func append(
        _ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion, keeping document: AppStoreDocument?
    ) async throws -> AppendResult {
        let result = try await appendEvents(events, to: stream, expecting: expected)
        // Kept only once the append is decided, as PostgreSQL keeps it in the append's transaction.
        if let document { try await archive.keep(document) }
        return result
    }

    private func appendEvents(_ events: [NewEvent], to stream: StreamID, expecting expected: ExpectedVersion) async throws -> AppendResult {
        if let hook = beforeAppend {
            beforeAppend = nil
            try await hook(self)
        }
        var heldElsewhere: [DeduplicationKey: AppendResult.EventReference] = [:]
        for key in events.compactMap(\.deduplicationKey) {
            if let stored = keys[key.rawValue], stored.streamID != stream.rawValue { heldElsewhere[key] = stored }
        }
        guard heldElsewhere.isEmpty else {
            throw StoreError.keyHeldByAnotherStream(stream: stream.rawValue, heldElsewhere)
        }
        var batchKeys: [String: Int] = [:]
        var fresh: [(index: Int, event: NewEvent)] = []
        for (index, event) in events.enumerated() {
            if let key = event.deduplicationKey?.rawValue {
                if keys[key] != nil || batchKeys[key] != nil { continue }
                batchKeys[key] = index
            }
            fresh.append((index, event))
        }
        var outcomes = [AppendResult.Outcome?](repeating: nil, count: events.count)
        var recordedAt: Date?
        if !fresh.isEmpty {
            let version = log.last { $0.streamID == stream.rawValue }?.streamVersion ?? 0
            let expectedVersion: Int64? = switch expected {
            case .any: nil
            case .noStream: 0
            case .exactly(let value): value
            }
            if let expectedVersion, expectedVersion != version {
                throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: expected.description, actual: version)
            }
            let now = Date()
            recordedAt = now
            for (offset, item) in fresh.enumerated() {
                let position = Int64(log.count + 1)
                let streamVersion = version + Int64(offset) + 1
                log.append(RecordedEvent(
                    position: position, streamID: stream.rawValue, streamVersion: streamVersion, eventID: item.event.eventID,
                    type: item.event.type.stored, data: item.event.data, metadata: item.event.metadata, recordedAt: now,
                    deduplicationKey: item.event.deduplicationKey?.rawValue
                ))
                if let key = item.event.deduplicationKey?.rawValue {
                    keys[key] = .init(eventID: item.event.eventID, position: position, streamID: stream.rawValue, streamVersion: streamVersion)
                }
                outcomes[item.index] = .appended(position: position, streamVersion: streamVersion)
            }
        }
        return AppendResult(streamID: stream.rawValue, outcomes: events.enumerated().map { index, event in
            outcomes[index] ?? .duplicate(of: keys[event.deduplicationKey!.rawValue]!)
        }, recordedAt: recordedAt)
    }

    public func readStream(_ stream: StreamID, fromVersion version: Int64, limit: Int) async throws -> [RecordedEvent] {
        Array(log.lazy.filter { $0.streamID == stream.rawValue && $0.streamVersion >= version }.prefix(limit))
    }

    public func readAll(after position: Int64, stream: StreamID?, limit: Int) async throws -> [RecordedEvent] {
        Array(log.lazy.filter { $0.position > position && (stream == nil || $0.streamID == stream?.rawValue) }.prefix(limit))
    }

    public func recorded(_ keys: [DeduplicationKey]) async throws -> [DeduplicationKey: AppendResult.EventReference] {
        var found: [DeduplicationKey: AppendResult.EventReference] = [:]
        for key in keys { found[key] = self.keys[key.rawValue] }
        return found
    }

    /// Every event in position order.
    public var events: [RecordedEvent] { log }
}
