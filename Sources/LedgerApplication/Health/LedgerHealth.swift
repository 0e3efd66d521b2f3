import Foundation
import LedgerDomain

/// What `/health` reports: the log's head, every current projection version and the transaction,
/// if any, that holds the log's followers back; and from them whether the ledger is degraded.
///
/// Every part is read in constant time, however long the log (see `ProjectionStatus`), so the
/// check can be polled as often as a load balancer likes.
public struct LedgerHealth: Sendable {
    /// When a slow thing becomes a problem.
    public struct Thresholds: Sendable, Hashable {
        /// A projection behind the head whose checkpoint has not moved for this long is stalled.
        public var stall: Duration
        /// A transaction holding the followers' horizon for this long is named as the cause.
        public var longTransaction: Duration

        public init(stall: Duration = .seconds(30), longTransaction: Duration = .seconds(30)) {
            self.stall = stall
            self.longTransaction = longTransaction
        }
    }

    /// The transaction the log's followers cannot read past (see `0004_follow_horizon.sql`): the
    /// oldest one of this database that has written anything. Appends committed after it stay
    /// invisible to the projections until it ends.
    public struct HorizonHolder: Sendable, Hashable {
        public let pid: Int32
        /// Seconds since its transaction began; nil when PostgreSQL does not show another role's
        /// sessions to this one (grant it `pg_read_all_stats` to see them).
        public let seconds: Double?
        public let user: String?
        public let application: String?
        /// `active`, `idle in transaction`, …
        public let state: String?

        public init(pid: Int32, seconds: Double?, user: String?, application: String?, state: String?) {
            self.pid = pid
            self.seconds = seconds
            self.user = user
            self.application = application
            self.state = state
        }
    }

    public let head: Int64
    /// The versions the runner follows or has stopped (retired ones are left out).
    public let projections: [ProjectionStatus]
    /// The transaction holding the followers back, when it has been open longer than the threshold.
    public let heldBy: HorizonHolder?
    /// Every reason the ledger is degraded, in words an operator can act on; empty when healthy.
    public let problems: [String]

    public var isDegraded: Bool { !problems.isEmpty }

    /// Degraded when a projection failed, when one is stalled (behind, its checkpoint still), or
    /// when a transaction has held the followers back for longer than the threshold.
    public static func judge(_ statuses: [ProjectionStatus], head: Int64, holder: HorizonHolder?, thresholds: Thresholds) -> LedgerHealth {
        let current = statuses.filter { $0.status != .retired }
        var problems: [String] = []
        for status in current {
            let label = "\(status.name) v\(status.version)"
            if status.status == .failed {
                let place = status.errorPosition.map { " at position \($0)" } ?? ""
                problems.append("projection \(label) failed\(place): \(status.error ?? "no reason recorded"); fix the cause, then restart the ledger or rebuild it (`ledger projections rebuild \(status.name)`)")
            } else if status.isStalled(after: thresholds.stall) {
                problems.append(String(
                    format: "projection %@ is stalled at position %lld, %lld positions behind the log, its checkpoint still for %.0f s",
                    label, status.position, status.lagPositions, status.lagSeconds
                ))
            }
        }
        let longHolder = holder.flatMap { holder in
            (holder.seconds ?? 0) > thresholds.longTransaction.inSeconds ? holder : nil
        }
        if let holder = longHolder {
            let who = [holder.user.map { "user \($0)" }, holder.application.flatMap { $0.isEmpty ? nil : "application \($0)" }, holder.state]
                .compactMap { $0 }.joined(separator: ", ")
            problems.append(String(
                format: "transaction of pid %d%@ has been open for %.0f s: events committed after it began stay invisible to the projections until it ends (`SELECT pg_terminate_backend(%d)` ends it)",
                holder.pid, who.isEmpty ? "" : " (\(who))", holder.seconds ?? 0, holder.pid
            ))
        }
        return LedgerHealth(
            head: head, projections: current, heldBy: longHolder, problems: problems
        )
    }
}
