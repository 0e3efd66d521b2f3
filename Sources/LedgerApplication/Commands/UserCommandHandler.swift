import LedgerDomain
import Logging

/// Runs a decision against a user's stream: read the stream (and the app's catalog), fold, decide,
/// append with the version that was read; when another writer got there first, do it all again.
///
/// The stream is the unit of consistency, so a decision such as "consume at most the balance" is
/// taken against exactly the events it will follow.
public struct UserCommandHandler: Sendable {
    /// What a command did.
    public struct Outcome<Value: Sendable>: Sendable {
        /// The append, or nil when the decision wrote nothing.
        public let append: AppendResult?
        /// The events the final decision asked for, in the order of `append.outcomes`.
        public let events: [PendingEvent]
        /// True when the command's key was recorded already (an earlier run of the same command):
        /// nothing was appended now, and `append`, `state` and `value` are the earlier run's.
        public var replayed: Bool = false
        /// The stream's state after the command: what was read plus what was appended, or, when
        /// another writer recorded some of the same facts first, the stream read again after the append.
        public let state: UserLedger
        public let catalog: ProductCatalog
        public let value: Value
    }

    public let store: any EventStore
    /// What the handler decides on: the user's stream and the app's catalog.
    public let reader: UserStreamReader
    let logger: Logger
    let maximumAttempts: Int

    /// Folds are kept between commands (`kept`), so a command reads and folds only what was
    /// appended since the last one on the same stream; nil folds every stream from its start.
    public init(store: any EventStore, logger: Logger, maximumAttempts: Int = 10, kept: KeptFolds? = KeptFolds()) {
        self.store = store
        self.reader = UserStreamReader(store: store, kept: kept)
        self.logger = logger
        self.maximumAttempts = maximumAttempts
    }

    /// Decides and appends, retrying on version conflicts. `decide` must be pure: it may run
    /// several times.
    ///
    /// With a `commandKey` (a client's idempotency key), the command's first event carries it as
    /// its deduplication key, so the append itself is the claim. When the key is recorded already
    /// (a retry after a crash or a lost answer, or a twin that got there first), nothing is
    /// appended and the outcome is the earlier run's: the stream as it stood after it, and the
    /// value `decide` gives on the stream as it stood before it.
    ///
    /// A transaction belongs to the first user who posted it: an append meeting a deduplication
    /// key another user's stream holds records nothing and refuses the command
    /// (`StoreError.keyHeldByAnotherStream`, answered as `CommandError.ownedByAnotherUser`). The
    /// store checks that in the append itself, so no lookup precedes it.
    ///
    /// `keeping` is the document (what Apple sent) the events name: kept by the append that
    /// records them, both or neither, so a refused command keeps nothing.
    public func execute<Value: Sendable>(
        app bundleID: String,
        user userID: String,
        metadata: [String: String] = [:],
        commandKey: DeduplicationKey? = nil,
        keeping document: AppStoreDocument? = nil,
        _ decide: (UserLedger, ProductCatalog) throws -> (events: [PendingEvent], value: Value)
    ) async throws -> Outcome<Value> {
        try await execute(app: bundleID, user: userID, metadata: metadata, commandKey: commandKey, keeping: document, lookingUp: []) { state, catalog, _ in
            try decide(state, catalog)
        }
    }

    /// As `execute(app:user:metadata:commandKey:keeping:_:)`, with where each of `keys` is
    /// recorded (any stream's) read together with the stream, in the same statement, and handed
    /// to `decide`: a post asks who holds its transactions without a round trip of its own.
    public func execute<Value: Sendable>(
        app bundleID: String,
        user userID: String,
        metadata: [String: String] = [:],
        commandKey: DeduplicationKey? = nil,
        keeping document: AppStoreDocument? = nil,
        lookingUp keys: [DeduplicationKey],
        _ decide: (UserLedger, ProductCatalog, [DeduplicationKey: AppendResult.EventReference]) throws -> (events: [PendingEvent], value: Value)
    ) async throws -> Outcome<Value> {
        let stream = try StreamID.user(app: bundleID, user: userID)
        var attempt = 0
        while true {
            attempt += 1
            if let commandKey, let earlier = try await store.recorded([commandKey])[commandKey] {
                let catalog = try await reader.catalog(app: bundleID)
                let found = try await store.recorded(keys)
                return try await replay(earlier, of: stream, catalog: catalog) { state, catalog in try decide(state, catalog, found) }
            }
            // Decisions read transactions judged with the catalog's history. The state is taken
            // out of the kept folds and given back on the way out, as read or, after an append,
            // moved on by what was appended: either way a fold of the log. What the kept catalog
            // and fold lack of the log, and the keys looked up, are read in one statement.
            let (catalog, taken, found) = try await reader.catalogAndState(app: bundleID, taking: stream, lookingUp: keys)
            var state = taken
            defer { reader.giveBack(state, of: stream) }
            var (events, value) = try decide(state, catalog, found)
            guard !events.isEmpty else {
                return Outcome(append: nil, events: [], state: state, catalog: catalog, value: value)
            }
            let keyed = commandKey.flatMap { key in events.firstIndex { $0.deduplicationKey == nil }.map { ($0, key) } }
            if let (index, key) = keyed { events[index] = PendingEvent(events[index].event, deduplicationKey: key) }
            let newEvents = try events.map { try NewEvent(pending: $0, metadata: metadata) }
            do {
                let result: AppendResult
                do {
                    result = try await store.append(
                        newEvents, to: stream, expecting: state.version == 0 ? .noStream : .exactly(state.version), keeping: document
                    )
                } catch let error as StoreError where error.code == .keyHeldByAnotherStream {
                    // Another stream holds one of the keys: the append recorded nothing.
                    throw Self.refusal(error.heldElsewhere, commandKey: keyed?.1)
                }
                if let (index, _) = keyed, case .duplicate(let earlier) = result.outcomes[index] {
                    // The same command's twin recorded it first.
                    return try await replay(earlier, of: stream, catalog: catalog) { state, catalog in try decide(state, catalog, found) }
                }
                let appended = zip(newEvents, result.outcomes).compactMap { event, outcome in
                    if case .appended(let position, let version) = outcome { (event, position, version) } else { nil }
                }
                guard appended.count == newEvents.count, let recordedAt = result.recordedAt else {
                    // Another writer recorded some of these facts after our read: the answer names
                    // their positions, so the state it gives must include them. The state read
                    // goes back first, for the read to start from.
                    reader.giveBack(state, of: stream)
                    state = try await reader.state(of: stream, catalog: catalog)
                    return Outcome(append: result, events: events, state: state, catalog: catalog, value: value)
                }
                // What folding the log now gives: the events as stored (read back from their JSON,
                // as a read of the log would), where and when the log recorded them.
                let stored = try appended.map { event, position, version in
                    (try UserEvent(type: event.type.stored, data: event.data), position, version)
                }
                for (event, position, version) in stored {
                    state.gather(event, version: version, context: .init(position: position, recordedAt: recordedAt))
                }
                state.classify(by: catalog)  // judged once, after the whole append
                return Outcome(append: result, events: events, state: state, catalog: catalog, value: value)
            } catch let error as StoreError where error.code == .wrongExpectedVersion && attempt < maximumAttempts {
                logger.debug("user stream moved while deciding, deciding again", metadata: [
                    "ledger.stream": "\(stream)", "ledger.attempt": "\(attempt)",
                ])
            }
        }
    }

    /// The outcome of a command recorded earlier under its key, at `earlier` (its first event).
    private func replay<Value: Sendable>(
        _ earlier: AppendResult.EventReference, of stream: StreamID, catalog: ProductCatalog,
        _ decide: (UserLedger, ProductCatalog) throws -> (events: [PendingEvent], value: Value)
    ) async throws -> Outcome<Value> {
        guard earlier.streamID == stream.rawValue else { throw CommandError.commandKeyReused(position: earlier.position) }
        let before = try await reader.state(of: stream, upToPosition: earlier.position - 1, catalog: catalog)
        let (events, value) = try decide(before, catalog)
        // The run's events were appended together, at consecutive versions from the first.
        let recorded = try await store.readStream(stream, fromVersion: earlier.streamVersion, limit: max(events.count, 1))
        let references = recorded.map {
            AppendResult.Outcome.duplicate(of: .init(eventID: $0.eventID, position: $0.position, streamID: $0.streamID, streamVersion: $0.streamVersion))
        }
        let after = try await reader.state(of: stream, upToPosition: recorded.last?.position ?? earlier.position, catalog: catalog)
        logger.debug("command recorded before under its key, answered from the log", metadata: [
            "ledger.stream": "\(stream)", "ledger.position": "\(earlier.position)",
        ])
        var outcome = Outcome(append: AppendResult(streamID: stream.rawValue, outcomes: references), events: events, state: after,
                              catalog: catalog, value: value)
        outcome.replayed = true
        return outcome
    }

    /// Defines or redefines a product in the app's catalog (an event on `catalog/<bundle id>`).
    /// Redefining a product exactly as it is records nothing.
    @discardableResult
    public func defineProduct(_ product: Product, app bundleID: String, metadata: [String: String] = [:]) async throws -> AppendResult? {
        let stream = try StreamID.catalog(app: bundleID)
        var attempt = 0
        while true {
            attempt += 1
            let (catalog, events) = try await reader.catalogStream(app: bundleID)
            if catalog[product.productId] == product { return nil }
            do {
                return try await store.append(
                    [NewEvent(ProductDefined(product: product), metadata: metadata)], to: stream,
                    expecting: events.isEmpty ? .noStream : .exactly(Int64(events.count))
                )
            } catch let error as StoreError where error.code == .wrongExpectedVersion && attempt < maximumAttempts {
                continue
            }
        }
    }

    /// The position a command reached: its append's, or when it recorded nothing, the user's latest event's.
    public func position<Value>(of outcome: Outcome<Value>, app: String, user: String) async throws -> Int64 {
        if let append = outcome.append { return append.position }
        return try await streamPosition(app: app, user: user, version: outcome.state.version)
    }

    /// The position of the user's event at `version` (its latest, for what a command that recorded nothing answers with).
    public func streamPosition(app: String, user: String, version: Int64) async throws -> Int64 {
        guard version > 0 else { return 0 }
        return try await store.readStream(StreamID.user(app: app, user: user), fromVersion: version, limit: 1).first?.position ?? 0
    }

    /// The keys App Store transactions are claimed under, old and new, each with its transaction:
    /// look them up (`execute(…lookingUp:…)`) to learn who holds the transactions
    /// (`heldElsewhere`).
    public static func claims(of transactionIDs: [String], app bundleID: String, environment: StoreEnvironment) -> [DeduplicationKey: String] {
        var keys: [DeduplicationKey: String] = [:]
        for id in transactionIDs {
            for key in DeduplicationKey.claimsOf(transactionID: id, app: bundleID, environment: environment) { keys[key] = id }
        }
        return keys
    }

    /// Which of the claimed transactions another stream of the app holds already (a transaction
    /// belongs to the first user of the app who posted it), where: from the claims' keys looked up.
    public static func heldElsewhere(
        _ claims: [DeduplicationKey: String], found: [DeduplicationKey: AppendResult.EventReference], app bundleID: String, user userID: String
    ) throws -> [String: Int64] {
        let stream = try StreamID.user(app: bundleID, user: userID)
        var elsewhere: [String: Int64] = [:]
        for (key, reference) in found where reference.streamID != stream.rawValue {
            if let id = claims[key] { elsewhere[id] = reference.position }
        }
        return elsewhere
    }

    /// The command's refusal when another stream holds some of its keys: its idempotency key
    /// reused by another user's command, or else facts another user recorded first.
    private static func refusal(_ heldElsewhere: [DeduplicationKey: AppendResult.EventReference], commandKey: DeduplicationKey?) -> CommandError {
        if let commandKey, let earlier = heldElsewhere[commandKey] {
            return CommandError.commandKeyReused(position: earlier.position)
        }
        // The last of them: an append records the post before the transactions it brought.
        let position = heldElsewhere.values.map(\.position).max() ?? 0
        return CommandError.ownedByAnotherUser(position: position)
    }
}

extension NewEvent {
    /// The event a decision asked for, in stored form.
    public init(pending: PendingEvent, metadata: [String: String]) throws {
        try self.init(pending.event.payload, metadata: metadata, deduplicationKey: pending.deduplicationKey)
    }
}
