import LedgerDomain
import Synchronization

/// Users' streams and apps' catalogs as folded so far, kept in memory so that the next read of
/// the same stream reads and folds only the events appended after them.
///
/// What is kept is the fold of a stream's first `version` events, which the log never changes
/// (it is append-only, and a stream's versions commit in order). Users' states are kept as last
/// judged: a read judges again with the catalog it passes, looking only at the transactions its
/// events touch when the catalog is the one they were judged with, and at all of them when it is
/// not, so a catalog change needs no invalidation (`UserLedger.classify(by:)`). A fold kept here
/// is this code's fold: nothing is written down, a restart or another version of the ledger folds
/// from the log again.
///
/// Bounded: past `capacity` users, or once the kept users' streams add up to more than
/// `eventCapacity` events (a fold's memory grows with its stream), the least recently used are
/// forgotten (their next read folds the whole stream once more).
public final class KeptFolds: Sendable {
    private struct Kept<Value> {
        var value: Value
        var used: UInt64
    }

    private struct State {
        var users: [String: Kept<UserLedger>] = [:]
        var catalogs: [String: Kept<KeptCatalog>] = [:]
        var clock: UInt64 = 0
        /// The kept users' stream versions, added up: the events their folds hold.
        var events: Int64 = 0
        var reads = 0
        var eventsRead = 0
    }

    /// An app's catalog folded from its stream's first `version` events.
    struct KeptCatalog: Sendable {
        let catalog: ProductCatalog
        let version: Int64
        let lastPosition: Int64
    }

    private let state = Mutex(State())
    public let capacity: Int
    public let eventCapacity: Int64

    public init(capacity: Int = 10_000, eventCapacity: Int64 = 1_000_000) {
        precondition(capacity >= 1 && eventCapacity >= 1, "a cache of folds keeps at least one")
        self.capacity = capacity
        self.eventCapacity = eventCapacity
    }

    /// How many reads went through the cache and how many events they read from the log (for
    /// tests and benchmarks: with long histories the second stays near the number appended).
    public var counts: (reads: Int, eventsRead: Int) { state.withLock { ($0.reads, $0.eventsRead) } }

    /// How many users' folds are kept.
    public var keptUsers: Int { state.withLock { $0.users.count } }

    /// How many events the kept users' folds hold.
    public var keptEvents: Int64 { state.withLock { $0.events } }

    /// The version and last position of the user's kept fold, if one is kept (and not taken out).
    public func kept(user stream: String) -> (version: Int64, lastPosition: Int64)? {
        state.withLock { state in state.users[stream].map { ($0.value.version, $0.value.lastPosition) } }
    }

    /// Takes the user's fold out, so that the reader holds the only copy and moves it on in
    /// place (a fold shared with this cache would be copied whole by its first change); the reader
    /// keeps it again once it has moved on. A read of the same user meanwhile folds from the log.
    func take(user stream: String) -> UserLedger? {
        state.withLock { state in
            guard let kept = state.users.removeValue(forKey: stream) else { return nil }
            state.events -= kept.value.version
            return kept.value
        }
    }

    /// Keeps `folded` unless a fold further along is kept already (one as far along is replaced:
    /// the same fold, judged more recently).
    func keep(_ folded: UserLedger, user stream: String, eventsRead: Int) {
        state.withLock { state in
            state.reads += 1
            state.eventsRead += eventsRead
            keep(folded, user: stream, in: &state)
        }
    }

    /// Counts a read whose fold its reader keeps for now, to give it back later (`putBack`), or
    /// a read of several streams for folds to come.
    public func count(eventsRead: Int) {
        state.withLock { state in
            state.reads += 1
            state.eventsRead += eventsRead
        }
    }

    /// Puts back a fold taken out: by a read it could not serve (a read of the past), or given
    /// back by the reader that took it, as it was or moved on along the log.
    func putBack(_ folded: UserLedger, user stream: String) {
        state.withLock { keep(folded, user: stream, in: &$0) }
    }

    private func keep(_ folded: UserLedger, user stream: String, in state: inout State) {
        state.clock += 1
        if let kept = state.users[stream] {
            guard kept.value.version <= folded.version else { return }
            state.events -= kept.value.version
        }
        state.users[stream] = Kept(value: folded, used: state.clock)
        state.events += folded.version
        guard state.users.count > capacity || state.events > eventCapacity else { return }
        // The least recently used first, until a tenth below both bounds: trimming stays rare.
        for (key, kept) in state.users.sorted(by: { $0.value.used < $1.value.used }) {
            guard state.users.count > capacity - capacity / 10 || state.events > eventCapacity - eventCapacity / 10 else { break }
            state.users[key] = nil
            state.events -= kept.value.version
        }
    }

    func catalog(_ app: String) -> KeptCatalog? {
        state.withLock { state in
            state.clock += 1
            state.catalogs[app]?.used = state.clock
            return state.catalogs[app]?.value
        }
    }

    func keep(_ folded: KeptCatalog, app: String) {
        state.withLock { state in
            state.clock += 1
            if let kept = state.catalogs[app], kept.value.version >= folded.version { return }
            state.catalogs[app] = Kept(value: folded, used: state.clock)
            Self.trim(&state.catalogs, to: capacity)
        }
    }

    /// Forgets the least recently used tenth once over `capacity`, so that trimming is rare.
    private static func trim<Value>(_ kept: inout [String: Kept<Value>], to capacity: Int) {
        guard kept.count > capacity else { return }
        let excess = kept.count - capacity + capacity / 10
        for key in kept.sorted(by: { $0.value.used < $1.value.used }).prefix(excess).map(\.key) {
            kept[key] = nil
        }
    }
}
