import Foundation
import LedgerDomain

/// Where a projection version is in its life, as `ledger.projections.status` stores it.
public enum ProjectionState: String, Sendable, Hashable, CaseIterable, Codable {
    /// Catching up with the log (beside the live version, if there is one); readers do not see it yet.
    case building
    /// What readers see: the view `ledger.<name>` points at its table.
    case live
    /// Stopped at an event it could not apply; `error` and `error_position` say which and why.
    /// Tried again when the runner restarts, or replaced by a rebuild.
    case failed
    /// Replaced by a newer version; its table is dropped.
    case retired
}

/// What `ledger projections status` and `/health` show for one projection version.
///
/// Read in constant time however long the log: the head is the largest position (one step down
/// the primary key's index), the lag is the head minus the checkpoint, and how long the
/// projection has been behind comes from when its checkpoint last moved (kept by the database,
/// see `0010_projection_checkpoints.sql`) and when the first event past it was recorded (the next
/// entry of the same index). Nothing counts events.
public struct ProjectionStatus: Sendable, Hashable {
    public let name: String
    public let version: Int
    public let status: ProjectionState
    /// The checkpoint: every event up to it is reflected in the version's table.
    public let position: Int64
    /// The log's head when this was read.
    public let head: Int64
    /// When the checkpoint last moved forward (or the version was registered).
    public let checkpointMovedAt: Date
    /// Seconds since the checkpoint last moved.
    let secondsSinceMoved: Double
    /// Age of the first event past the checkpoint, in seconds; nil when there is none.
    let pendingSeconds: Double?
    public let error: String?
    public let errorPosition: Int64?

    public init(
        name: String, version: Int, status: ProjectionState, position: Int64, head: Int64, checkpointMovedAt: Date,
        secondsSinceMoved: Double, pendingSeconds: Double?, error: String?, errorPosition: Int64?
    ) {
        self.name = name
        self.version = version
        self.status = status
        self.position = position
        self.head = head
        self.checkpointMovedAt = checkpointMovedAt
        self.secondsSinceMoved = secondsSinceMoved
        self.pendingSeconds = pendingSeconds
        self.error = error
        self.errorPosition = errorPosition
    }

    /// Positions between the checkpoint and the head: 0 when caught up, otherwise an upper bound on
    /// the events not applied yet (an aborted append leaves its positions unused).
    public var lagPositions: Int64 { max(0, head - position) }

    /// How long the projection has been behind without its checkpoint moving, in seconds: 0 when
    /// caught up. It is the shorter of the time since the checkpoint last moved and the age of the
    /// first event not applied, so a projection working through a backlog (its checkpoint moving)
    /// and one that just received an event after a quiet hour (its first pending event new) both
    /// read as small.
    public var lagSeconds: Double {
        guard lagPositions > 0 else { return 0 }
        return min(secondsSinceMoved, pendingSeconds ?? secondsSinceMoved)
    }

    /// Behind the head with a checkpoint that has not moved for longer than `threshold`: stuck on a
    /// batch, retrying a lost database, or held back by a long transaction. Failed and retired
    /// versions are not followed, so they are never stalled.
    public func isStalled(after threshold: Duration) -> Bool {
        (status == .live || status == .building) && lagSeconds > threshold.inSeconds
    }
}
