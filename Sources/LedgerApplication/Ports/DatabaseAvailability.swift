import Foundation

/// Whether the database answers, as a monitor that probes it keeps it: requests that need the
/// database are refused at once while it is down, and `/health` says so without asking it.
public protocol DatabaseAvailability: Sendable {
    /// Up, or down since when and why.
    var state: DatabaseState { get }
    /// Returns once the database is seen down (at once when it is).
    func waitUntilDown() async
    /// A request met an error that shows the database is unreachable: probe now.
    func reportOutage(_ error: any Error)
    /// Whether `error` is the database being unreachable (as opposed to refusing a statement).
    func isOutage(_ error: any Error) -> Bool
    /// Whether `error` is the database too busy to finish the statement in time (a lock or
    /// statement timeout, a deadlock): nothing was recorded, and the same request may be sent again.
    func isBusy(_ error: any Error) -> Bool
}

extension DatabaseAvailability {
    public var isDown: Bool {
        if case .down = state { return true }
        return false
    }
}

/// The database as the monitor last saw it.
public enum DatabaseState: Sendable, Equatable {
    case up
    case down(since: Date, reason: String)
}
