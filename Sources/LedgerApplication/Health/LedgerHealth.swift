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
        /// An app whose notifications were last checked against Apple's history longer ago than
        /// this is named (a warning: it does not degrade the ledger).
        public var syncStale: Duration
        /// How long one reading of the database answers the probes that follow it (see
        /// `RecentHealth`); zero reads it for every probe. Whether the database answers at all is
        /// asked of the database monitor on every probe, whatever this says.
        public var readingKept: Duration

        public init(stall: Duration = .seconds(30), longTransaction: Duration = .seconds(30), syncStale: Duration = .seconds(1_800),
                    readingKept: Duration = .seconds(1)) {
            self.stall = stall
            self.longTransaction = longTransaction
            self.syncStale = syncStale
            self.readingKept = readingKept
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

    /// How far an app's notifications have been checked against Apple's history, per environment
    /// (apps with an App Store Server API key).
    public struct NotificationSync: Sendable, Hashable {
        public let app: String
        public let environment: StoreEnvironment
        public let syncedThrough: Date?
        public let lastRunAt: Date?
        public let lastError: String?
        public let behind: Bool

        public init(app: String, environment: StoreEnvironment, syncedThrough: Date?, lastRunAt: Date?, lastError: String?, behind: Bool) {
            self.app = app
            self.environment = environment
            self.syncedThrough = syncedThrough
            self.lastRunAt = lastRunAt
            self.lastError = lastError
            self.behind = behind
        }
    }

    public let head: Int64
    /// The versions the runner follows or has stopped (retired ones are left out).
    public let projections: [ProjectionStatus]
    /// The transaction holding the followers back, when it has been open longer than the threshold.
    public let heldBy: HorizonHolder?
    /// Every reason the ledger is degraded, in words an operator can act on; empty when healthy.
    public let problems: [String]
    public let notificationSync: [NotificationSync]
    /// What an operator should know that does not degrade the ledger (a sync of Apple's
    /// notification history behind), in words.
    public let warnings: [String]

    public var isDegraded: Bool { !problems.isEmpty }

    /// Degraded when a projection failed, when one is stalled (behind, its checkpoint still), or
    /// when a transaction has held the followers back for longer than the threshold.
    public static func judge(
        _ statuses: [ProjectionStatus], head: Int64, holder: HorizonHolder?, thresholds: Thresholds, notificationSync: [NotificationSync] = []
    ) -> LedgerHealth {
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
        let warnings = notificationSync.filter(\.behind).map { sync in
            let when = sync.syncedThrough.map { "checked against Apple's notification history up to \($0.formatted(.iso8601))" } ?? "never checked against Apple's notification history"
            let error = sync.lastError.map { "; the last walk failed: \($0.prefix(300))" } ?? ""
            return "notifications of \(sync.app) (\(sync.environment.rawValue)) were \(when)\(error): any Apple failed to deliver since may be missing until the leading server walks it again, or `ledger appstore sync --app \(sync.app)` does"
        }
        return LedgerHealth(
            head: head, projections: current, heldBy: longHolder, problems: problems, notificationSync: notificationSync, warnings: warnings
        )
    }
}
