import LedgerApplication
import LedgerProjections
import Synchronization

/// The projection registry (`ledger.projections`) as this server last heard of it: where every
/// version stands, for reads that say how far the projections have come, without a query.
///
/// `ChangeFeed` loads it when it starts listening and applies every change PostgreSQL announces
/// after that, the runner's checkpoints among them, whether the runner is in this process or in
/// another server on the same database. While the feed does not listen it knows nothing, and
/// readers ask the database.
public final class ProjectionBoard: Sendable {
    private struct State {
        var listening = false
        var rows: [VersionKey: RegistryRow] = [:]
    }

    private struct VersionKey: Hashable {
        let name: String
        let version: Int
    }

    private let state = Mutex(State())

    public init() {}

    /// Whether the board follows the registry now.
    public var isListening: Bool { state.withLock { $0.listening } }

    /// Where the named projections stand, or nil when the board does not follow the registry.
    func readiness(of projections: [ProjectionName]) -> ProjectionReadiness? {
        state.withLock { state in
            guard state.listening else { return nil }
            return ProjectionReadiness(of: projections, rows: state.rows.values)
        }
    }

    /// The smallest live checkpoint of the named projections and the live version of each, or nil
    /// when one of them has no live version or the board does not follow the registry.
    func live(_ projections: [ProjectionName]) -> (reached: Int64, versions: [ProjectionName: Int])? {
        state.withLock { state in
            guard state.listening else { return nil }
            var versions: [ProjectionName: Int] = [:]
            var reached = Int64.max
            for row in state.rows.values where row.state == .live && projections.contains(row.name) {
                guard versions[row.name] == nil else { return nil }  // two live versions: a switch under way
                versions[row.name] = row.version
                reached = min(reached, row.position)
            }
            return versions.count == Set(projections).count ? (reached, versions) : nil
        }
    }

    /// The registry as loaded after listening began: the board follows it from now on.
    func load(_ rows: [RegistryRow]) {
        state.withLock { state in
            var loaded: [VersionKey: RegistryRow] = [:]
            for row in rows { loaded[VersionKey(name: row.name.rawValue, version: row.version)] = row }
            state.rows = loaded
            state.listening = true
        }
    }

    /// A row as a change announced it. Announcements of changes the board has already seen (it
    /// loaded the registry after them) are ignored, and a checkpoint never moves back.
    func apply(_ row: RegistryRow) {
        state.withLock { state in
            let key = VersionKey(name: row.name.rawValue, version: row.version)
            if let known = state.rows[key] {
                guard row.change > known.change else { return }
                var row = row
                row.position = max(row.position, known.position)
                state.rows[key] = row
            } else {
                state.rows[key] = row
            }
        }
    }

    func remove(name: String, version: Int) {
        state.withLock { _ = $0.rows.removeValue(forKey: VersionKey(name: name, version: version)) }
    }

    /// The feed stopped listening: know nothing until it loads the registry again.
    func deaf() {
        state.withLock { state in
            state.listening = false
            state.rows = [:]
        }
    }
}

/// One version's row of `ledger.projections`, as readers need it.
struct RegistryRow: Hashable, Sendable {
    let name: ProjectionName
    let version: Int
    let state: ProjectionState?
    var position: Int64
    let errorPosition: Int64?
    /// The row's change number (`ledger.projection_change`): a later change has a larger one.
    let change: Int64

    /// A row from an announcement on `ledger_changes`: `<name> <version> <status> <position>
    /// <error position or -> <change>`; nil when it is not one.
    init?(announced fields: [Substring]) {
        guard fields.count == 6, let version = Int(fields[1]), let position = Int64(fields[3]), let change = Int64(fields[5]) else {
            return nil
        }
        let errorPosition: Int64?
        if fields[4] == "-" {
            errorPosition = nil
        } else if let value = Int64(fields[4]) {
            errorPosition = value
        } else {
            return nil
        }
        self.init(name: ProjectionName(rawValue: String(fields[0])), version: version, state: ProjectionState(rawValue: String(fields[2])),
                  position: position, errorPosition: errorPosition, change: change)
    }

    init(name: ProjectionName, version: Int, state: ProjectionState?, position: Int64, errorPosition: Int64?, change: Int64) {
        self.name = name
        self.version = version
        self.state = state
        self.position = position
        self.errorPosition = errorPosition
        self.change = change
    }
}

/// Where some projections stand: the position all of them have reached, or why a read cannot be
/// answered from them.
struct ProjectionReadiness {
    /// The smallest live checkpoint, when every projection has a live version.
    var reached: Int64?
    /// Projections with no live version that are being built, with the building checkpoint.
    var building: [(ProjectionName, Int64)] = []
    /// Projections with no live version whose version failed, with where.
    var failed: [(ProjectionName, Int64)] = []
    /// Projections with no version at all: the runner has not set them up yet.
    var missing: [ProjectionName] = []

    init(of projections: [ProjectionName], rows: some Sequence<RegistryRow>) {
        var live: [ProjectionName: Int64] = [:]
        var building: [ProjectionName: Int64] = [:]
        var failed: [ProjectionName: Int64] = [:]
        let wanted = Set(projections)
        for row in rows where wanted.contains(row.name) {
            switch row.state {
            case .live: live[row.name] = row.position
            case .building: building[row.name] = row.position
            case .failed: failed[row.name] = row.errorPosition ?? row.position
            case .retired, nil: break
            }
        }
        for name in projections where live[name] == nil {
            // A version building beside a failed one (a fix being rolled out) is the one to wait for.
            if let position = building[name] {
                self.building.append((name, position))
            } else if let position = failed[name] {
                self.failed.append((name, position))
            } else {
                missing.append(name)
            }
        }
        if self.building.isEmpty, self.failed.isEmpty, missing.isEmpty {
            reached = projections.compactMap { live[$0] }.min() ?? 0
        }
    }

    func checkpoint() throws -> Int64 {
        guard let reached else { throw ReadError.projectionsNotReady(missing: missing, building: building, failed: failed) }
        return reached
    }
}
