import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import Metrics
import Synchronization

/// Users' entitlement rows (ownership, periods, balances) as this server last read them, so that
/// reading a user whose rows have not changed costs no query.
///
/// A user's rows in those projections change only through events of the user's own stream or of
/// the app's catalog. So the cache follows the log behind the projections: each time their
/// checkpoint moves from `validThrough` to a later one, `ChangeFeed` asks the log which streams
/// have events in between (one query over the position index), and the rows of those users are
/// forgotten; an event of a catalog, a version switch (a rebuild or a fix going live) or a gap of
/// more than `largestGap` positions forgets everything. A kept entry therefore holds the user's
/// rows as of `validThrough`.
///
/// A read uses an entry only when `validThrough` has reached the checkpoint the read answers at;
/// otherwise it asks the database (as it does while the feed does not listen: the cache then
/// holds nothing). Rows read from the database are kept only when no invalidation happened while
/// they were read (`epoch`): they were read after every event the cache had accounted for, and
/// anything later is in a range still to come.
public final class EntitlementRowCache: Sendable {
    private struct State {
        /// Whether entries may be used: the feed listens and the cache has accounted for the log
        /// up to `validThrough`.
        var enabled = false
        var validThrough: Int64 = 0
        /// The live version of each projection the rows come from, when `validThrough` was set.
        var versions: [ProjectionName: Int] = [:]
        /// Grows whenever entries are forgotten.
        var epoch: UInt64 = 0
        var entries: [String: EntitlementRows] = [:]
    }

    /// The projections whose rows are kept.
    static let projections: [ProjectionName] = [.ownership, .subscriptionPeriods, .consumableBalances]
    /// Beyond this many positions at once (a catch-up after downtime), everything is forgotten
    /// instead of asking which streams moved.
    static let largestGap: Int64 = 20_000

    private let state = Mutex(State())
    let capacity: Int
    private let hits = Counter(label: "ledger_entitlement_cache_reads_total", dimensions: [("result", "hit")])
    private let misses = Counter(label: "ledger_entitlement_cache_reads_total", dimensions: [("result", "miss")])
    private let answered = Atomic<Int>(0)

    public static let defaultCapacity = 200_000

    /// - Parameter capacity: the most users kept; beyond it, an eighth of them are forgotten.
    public init(capacity: Int = defaultCapacity) {
        precondition(capacity >= 1, "an entitlement cache keeps one user at least")
        self.capacity = capacity
    }

    /// How many reads the cache answered since it was made.
    public var hitCount: Int { answered.load(ordering: .relaxed) }

    /// How many users' rows are kept.
    public var count: Int { state.withLock { $0.entries.count } }

    /// The position up to which kept rows are true, while entries may be used.
    public var validThrough: Int64? { state.withLock { $0.enabled ? $0.validThrough : nil } }

    /// A ticket for a read at checkpoint `position`: the kept rows of `stream` when they are true
    /// there, or the epoch to keep rows about to be read from the database with.
    enum Lookup {
        case hit(EntitlementRows)
        case miss(epoch: UInt64?)
    }

    func lookup(_ stream: String, at position: Int64) -> Lookup {
        let result: Lookup = state.withLock { state in
            guard state.enabled else { return .miss(epoch: nil) }
            if state.validThrough >= position, let rows = state.entries[stream] { return .hit(rows) }
            return .miss(epoch: state.epoch)
        }
        switch result {
        case .hit:
            hits.increment()
            answered.add(1, ordering: .relaxed)
        case .miss: misses.increment()
        }
        return result
    }

    /// Keeps rows read from the database, unless anything was forgotten since `epoch` was taken.
    func keep(_ rows: EntitlementRows, for stream: String, epoch: UInt64) {
        state.withLock { state in
            guard state.enabled, state.epoch == epoch else { return }
            if state.entries.count >= capacity, state.entries[stream] == nil {
                for key in state.entries.keys.prefix(max(1, capacity / 8)) { state.entries.removeValue(forKey: key) }
            }
            state.entries[stream] = rows
        }
    }

    /// Forgets everything and uses nothing until `follow` runs again (the feed stopped listening).
    func disable() {
        state.withLock { state in
            state.enabled = false
            state.epoch &+= 1
            state.entries = [:]
        }
    }

    /// Brings the cache up to where the board says the projections stand: forgets the users with
    /// events since `validThrough` (asking `streams` for them), or everything when the live
    /// versions changed, a catalog moved or the gap is too wide. Called by one task at a time.
    func follow(_ board: ProjectionBoard, streams: (_ after: Int64, _ through: Int64) async throws -> [String]) async throws {
        guard let (reached, versions) = board.live(Self.projections) else {
            // A projection without a live version: reads are refused, and rows kept now would not
            // be accounted for.
            disable()
            return
        }
        let (enabled, from, known) = state.withLock { ($0.enabled, $0.validThrough, $0.versions) }
        guard enabled, known == versions, reached >= from, reached - from <= Self.largestGap else {
            restart(at: reached, versions: versions)
            return
        }
        guard reached > from else { return }
        let moved = try await streams(from, reached)
        let catalogMoved = moved.contains { if case .catalog = StreamID.kind(of: $0) { true } else { false } }
        state.withLock { state in
            guard state.enabled, state.validThrough == from else { return }
            state.epoch &+= 1
            if catalogMoved {
                state.entries = [:]
            } else {
                for stream in moved { state.entries.removeValue(forKey: stream) }
            }
            state.validThrough = reached
        }
    }

    private func restart(at position: Int64, versions: [ProjectionName: Int]) {
        state.withLock { state in
            state.enabled = true
            state.epoch &+= 1
            state.entries = [:]
            state.validThrough = position
            state.versions = versions
        }
    }
}
