import Foundation
import LedgerDomain

/// Reads what the log says of one user of an app: the user's stream folded into a `UserLedger`,
/// and the app's catalog, at the log's end or at any past point.
///
/// The one reader of both: the command handler decides on what it returns, the projection runner
/// derives rows from it, and `ledger query` answers from it. A stream holding an event type this
/// version does not know is an error here, for every caller alike, never silently skipped.
///
/// With `kept`, folds are kept between reads, and a read folds only the events appended since the
/// kept fold: what a command or a projection batch costs then depends on what it adds, not on how
/// long the user's history is. Reads of the past that a kept fold has gone beyond fold the log
/// from the start, as a reader without `kept` always does.
public struct UserStreamReader: Sendable {
    let store: any EventStore
    public let kept: KeptFolds?

    public init(store: any EventStore, kept: KeptFolds? = nil) {
        self.store = store
        self.kept = kept
    }

    /// The user's stream folded to its end, or up to log `position` for answers about the past,
    /// its transactions judged with the app's catalog as of the same position.
    public func state(app bundleID: String, user userID: String, upToPosition position: Int64 = .max) async throws -> UserLedger {
        let catalog = try await catalog(app: bundleID, upToPosition: position)
        return try await state(of: StreamID.user(app: bundleID, user: userID), upToPosition: position, catalog: catalog)
    }

    /// A user stream folded to its end, or up to log `position`, judged with `catalog` (which the
    /// caller read up to the same position): from the kept fold when there is one at or before
    /// `position`, else from the start. The fold is kept judged, so that the next read judges again
    /// only the transactions its events touch (`UserLedger.classify(by:)`).
    public func state(of stream: StreamID, upToPosition position: Int64 = .max, catalog: ProductCatalog) async throws -> UserLedger {
        try await fold(of: stream, upToPosition: position, catalog: catalog, keeping: true)
    }

    /// Every event of a stream after version `afterVersion`, up to some log position, in version
    /// order: what a projection batch holds of a user (the batch holds every event the log has
    /// between its first position and its last), or what was read of the stream for it.
    public struct Tail: Sendable {
        public let afterVersion: Int64
        public let events: [RecordedEvent]

        public init(afterVersion: Int64, events: [RecordedEvent]) {
            self.afterVersion = afterVersion
            self.events = events
        }

        /// The stream's events of a batch of the log (at least one).
        public init(batch events: [RecordedEvent]) {
            self.init(afterVersion: (events.first?.streamVersion ?? 1) - 1, events: events)
        }
    }

    /// As `state(of:upToPosition:catalog:)`, for a batch of the log that ends at `position`, given
    /// the stream's `tail` up to it. When the kept fold ends where the tail starts, its events are
    /// folded as they are and the stream is not read at all: a projection batch reads the log
    /// once, however long its users' histories.
    public func state(of stream: StreamID, upToPosition position: Int64, catalog: ProductCatalog, tail: Tail?) async throws -> UserLedger {
        try await fold(of: stream, upToPosition: position, catalog: catalog, keeping: true, tail: tail)
    }

    /// The stream folded to its end, as `state(of:catalog:)` reads it, but taken out of the kept
    /// folds: the caller holds the only copy and moves it on in place, without the copy a change to
    /// a fold shared with the cache would make. Give it back (`giveBack`) once done, as it was or
    /// moved on to a later version of the log (with the `recorded_at` the log gave), never as a
    /// state the log does not hold. Until then a read of the same stream folds it from the start.
    public func takeState(of stream: StreamID, catalog: ProductCatalog) async throws -> UserLedger {
        try await fold(of: stream, upToPosition: .max, catalog: catalog, keeping: false)
    }

    /// The app's catalog and the user's stream folded to its end, as `catalog(app:)` and then
    /// `takeState(of:catalog:)` give them (the state taken out of the kept folds), but with what
    /// both lack of the log read in one statement: a command's one read before it decides.
    ///
    /// With `keys`, where each of them is recorded is read in the same statement.
    public func catalogAndState(
        app bundleID: String, taking stream: StreamID, lookingUp keys: [DeduplicationKey] = []
    ) async throws -> (catalog: ProductCatalog, state: UserLedger, recorded: [DeduplicationKey: AppendResult.EventReference]) {
        guard let kept else {
            let catalog = try await catalog(app: bundleID)
            return (catalog, try await takeState(of: stream, catalog: catalog), try await store.recorded(keys))
        }
        let catalogStream = try StreamID.catalog(app: bundleID)
        var folded = kept.catalog(bundleID) ?? KeptFolds.KeptCatalog(catalog: ProductCatalog(), version: 0, lastPosition: 0)
        let userVersion = kept.kept(user: stream.rawValue)?.version ?? 0
        let (read, recorded) = try await store.readStreams([(catalogStream, folded.version), (stream, userVersion)], upToPosition: .max, lookingUp: keys)
        var catalog = folded.catalog
        for event in read[catalogStream.rawValue] ?? [] {
            try catalog.apply(event)
            folded = KeptFolds.KeptCatalog(catalog: catalog, version: event.streamVersion, lastPosition: event.position)
        }
        kept.keep(folded, app: bundleID)
        // When another command took or moved the fold meanwhile, the tail does not follow it and
        // the fold reads the stream itself.
        let tail = Tail(afterVersion: userVersion, events: read[stream.rawValue] ?? [])
        let state = try await fold(of: stream, upToPosition: .max, catalog: folded.catalog, keeping: false, tail: tail, tailRead: true)
        return (folded.catalog, state, recorded)
    }

    /// Keeps a state taken with `takeState` again.
    public func giveBack(_ state: UserLedger, of stream: StreamID) {
        kept?.putBack(state, user: stream.rawValue)
    }

    private func fold(
        of stream: StreamID, upToPosition position: Int64, catalog: ProductCatalog, keeping: Bool, tail: Tail? = nil, tailRead: Bool = false
    ) async throws -> UserLedger {
        // Taken out, so that this read holds the only copy and moves it on in place.
        var taken = kept?.take(user: stream.rawValue)
        guard let kept, (taken?.lastPosition ?? 0) <= position else {
            // A read of the past: the fold taken out goes back as it was.
            if let kept, let taken { kept.putBack(taken, user: stream.rawValue) }
            var state = UserLedger()
            let events = try await readWhole(stream)
            for event in events where event.position <= position { try state.gather(event) }
            state.classify(by: catalog)
            kept?.count(eventsRead: events.count)
            return state
        }
        var state = taken.take() ?? UserLedger()
        var read = 0
        if let tail, Self.follows(state.version, tail, upTo: position) {
            for event in tail.events { try state.gather(event) }
            if tailRead { read = tail.events.count }
        } else {
            read = try await forEvents(of: stream, after: state.version, upToPosition: position) { event in try state.gather(event) }
        }
        state.classify(by: catalog)
        if keeping {
            kept.keep(state, user: stream.rawValue, eventsRead: read)
        } else {
            kept.count(eventsRead: read)
        }
        return state
    }

    /// Whether `tail` starts right after version `version` and holds versions `version + 1`,
    /// `version + 2`, … in order, none past `position`.
    static func follows(_ version: Int64, _ tail: Tail, upTo position: Int64) -> Bool {
        guard tail.afterVersion == version, (tail.events.last?.position ?? 0) <= position else { return false }
        return tail.events.enumerated().allSatisfy { $0.element.streamVersion == version + 1 + Int64($0.offset) }
    }

    /// The stream's events after version `version`, in order, up to log `position`. Returns how
    /// many events it read from the log (some may lie past `position`).
    private func forEvents(
        of stream: StreamID, after version: Int64, upToPosition position: Int64, _ body: (RecordedEvent) throws -> Void
    ) async throws -> Int {
        var next = version + 1
        var read = 0
        while true {
            let page = try await store.readStream(stream, fromVersion: next, limit: Self.pageSize)
            read += page.count
            for event in page {
                // A stream's positions grow with its versions: the rest is past `position` too.
                guard event.position <= position else { return read }
                try body(event)
                next = event.streamVersion + 1
            }
            if page.count < Self.pageSize { return read }
        }
    }

    /// The app's catalog with the events it was folded from (their count is the stream's version;
    /// the last one says where and when it last changed).
    public func catalogStream(
        app bundleID: String, upToPosition position: Int64 = .max
    ) async throws -> (catalog: ProductCatalog, events: [RecordedEvent]) {
        let events = try await readWhole(StreamID.catalog(app: bundleID)).filter { $0.position <= position }
        return (try ProductCatalog(folding: events), events)
    }

    /// The app's catalog, or as of log `position`, from the kept fold when there is one.
    public func catalog(app bundleID: String, upToPosition position: Int64 = .max) async throws -> ProductCatalog {
        guard let kept else { return try await catalogStream(app: bundleID, upToPosition: position).catalog }
        let stream = try StreamID.catalog(app: bundleID)
        var folded = kept.catalog(bundleID) ?? KeptFolds.KeptCatalog(catalog: ProductCatalog(), version: 0, lastPosition: 0)
        guard folded.lastPosition <= position else { return try await catalogStream(app: bundleID, upToPosition: position).catalog }
        var catalog = folded.catalog
        try await forEvents(of: stream, after: folded.version, upToPosition: position) { event in
            try catalog.apply(event)
            folded = KeptFolds.KeptCatalog(catalog: catalog, version: event.streamVersion, lastPosition: event.position)
        }
        kept.keep(folded, app: bundleID)
        return folded.catalog
    }

    /// Where the product's current definition was recorded in the app's catalog, if it is defined.
    public func definitionPosition(of productID: String, app bundleID: String) async throws -> Int64? {
        for event in try await readWhole(StreamID.catalog(app: bundleID)).reversed() where event.type == ProductDefined.typeName.stored {
            if try LedgerJSON.decode(ProductDefined.self, from: event.data).product.productId == productID { return event.position }
        }
        return nil
    }

    /// The user's stream and the app's catalog as they were once `instant` had passed: only events
    /// recorded by then count.
    public func asOf(app bundleID: String, user userID: String, recordedBy instant: Date) async throws -> (UserLedger, ProductCatalog) {
        let user = try await readWhole(StreamID.user(app: bundleID, user: userID)).filter { $0.recordedAt <= instant }
        let catalog = try await readWhole(StreamID.catalog(app: bundleID)).filter { $0.recordedAt <= instant }
        let products = try ProductCatalog(folding: catalog)
        return (try UserLedger(folding: user, catalog: products), products)
    }

    /// Every event of a stream, in version order.
    func readWhole(_ stream: StreamID) async throws -> [RecordedEvent] {
        var events: [RecordedEvent] = []
        while true {
            let page = try await store.readStream(stream, fromVersion: Int64(events.count) + 1, limit: Self.pageSize)
            events += page
            if page.count < Self.pageSize { return events }
        }
    }

    static var pageSize: Int { 5_000 }
}
