import LedgerApplication
import LedgerDomain
import Synchronization

/// Users' streams and apps' catalogs folded up to a log position, shared by the projections of
/// one runner: every live projection follows the same batches, and without this each of them read
/// and folded every touched user's whole stream again, six times per batch.
///
/// A stream folded up to a position is the same whoever asks and whenever: the log is append-only
/// and a batch never reaches past a position whose predecessors might still commit (the gap
/// guard). So the first projection to ask folds, and the others, asking for the same user at the
/// same batch end, wait for that fold instead of doing their own. A fold that fails is not kept
/// (the next ask tries again: the error may have been the database's). Only the folds of the
/// latest `positionsKept` batch ends are kept: projections that have fallen further behind fold
/// for themselves, as before.
final class SharedFolds: Sendable {
    private struct Key: Hashable {
        let stream: String
        let position: Int64
    }

    private struct State {
        var states: [Key: Task<UserLedger, any Error>] = [:]
        var catalogs: [Key: Task<ProductCatalog, any Error>] = [:]
        /// Batch ends with folds kept, oldest first.
        var positions: [Int64] = []
        var folds = 0
        var shared = 0
        var readTogether = (statements: 0, streams: 0, events: 0)
    }

    private let state = Mutex(State())
    let positionsKept: Int
    /// Each stream's fold as of the furthest batch end folded, which the next batch's fold starts
    /// from: a batch reads only the events it adds, however long the users' histories.
    let kept: KeptFolds

    init(positionsKept: Int = 16, kept: KeptFolds = KeptFolds()) {
        self.positionsKept = positionsKept
        self.kept = kept
    }

    /// How many folds were made, and how many asks were answered with another's fold (for tests
    /// and benchmarks).
    var counts: (folds: Int, shared: Int) { state.withLock { ($0.folds, $0.shared) } }

    /// How many statements read several users' streams for the folds of a batch, how many streams
    /// and events they read (see `ProjectionBatchWriter.readMissing`).
    var readTogether: (statements: Int, streams: Int, events: Int) { state.withLock { $0.readTogether } }

    func noteReadTogether(streams: Int, events: Int) {
        state.withLock { state in
            state.readTogether.statements += 1
            state.readTogether.streams += streams
            state.readTogether.events += events
        }
    }

    /// Whether a fold of the stream up to `position` is kept, or being made.
    func has(_ stream: StreamID, upTo position: Int64) -> Bool {
        state.withLock { $0.states[Key(stream: stream.rawValue, position: position)] != nil }
    }

    /// The stream folded up to the batch end `position`, from `tail` when it follows the kept
    /// fold (see `UserStreamReader.state(of:upToPosition:catalog:tail:)`).
    func state(
        of stream: StreamID, upTo position: Int64, catalog: ProductCatalog, tail: UserStreamReader.Tail?,
        reader: UserStreamReader
    ) async throws -> UserLedger {
        let key = Key(stream: stream.rawValue, position: position)
        let task = state.withLock { state -> Task<UserLedger, any Error> in
            if let known = state.states[key] {
                state.shared += 1
                return known
            }
            state.folds += 1
            let task = Task { try await reader.state(of: stream, upToPosition: position, catalog: catalog, tail: tail) }
            state.states[key] = task
            keep(position, in: &state)
            return task
        }
        return try await value(of: task, kept: \.states, under: key)
    }

    func catalog(app: String, upTo position: Int64, reader: UserStreamReader) async throws -> ProductCatalog {
        let key = Key(stream: app, position: position)
        let task = state.withLock { state -> Task<ProductCatalog, any Error> in
            if let known = state.catalogs[key] { return known }
            let task = Task { try await reader.catalog(app: app, upToPosition: position) }
            state.catalogs[key] = task
            keep(position, in: &state)
            return task
        }
        return try await value(of: task, kept: \.catalogs, under: key)
    }

    /// A shared fold's value; a failed fold is forgotten, so that the next to ask folds again.
    private func value<Value>(of task: Task<Value, any Error>, kept folds: WritableKeyPath<State, [Key: Task<Value, any Error>]>, under key: Key)
        async throws -> Value
    {
        do {
            return try await task.value
        } catch {
            state.withLock { state in
                if state[keyPath: folds][key] == task { state[keyPath: folds][key] = nil }
            }
            throw error
        }
    }

    /// Notes a batch end; forgets the folds of the oldest when more than `positionsKept` are kept.
    private func keep(_ position: Int64, in state: inout State) {
        guard !state.positions.contains(position) else { return }
        state.positions.append(position)
        guard state.positions.count > positionsKept else { return }
        let dropped = Set(state.positions.prefix(state.positions.count - positionsKept))
        state.positions.removeFirst(state.positions.count - positionsKept)
        state.states = state.states.filter { !dropped.contains($0.key.position) }
        state.catalogs = state.catalogs.filter { !dropped.contains($0.key.position) }
    }
}
