import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain

/// `GET /health`: no auth; whether the database answers, how far the log has come, where each
/// projection stands, and what (if anything) holds the ledger back. Constant time however long the
/// log (see `LedgerHealth`); one reading of the database serves the probes of the following second
/// (`LedgerHealth.Thresholds.readingKept`), while whether the database answers is asked of the
/// database monitor, in memory, on every probe.
///
/// 200 `ok`; 503 `degraded` when a projection failed, when one is stalled (behind the log with a
/// checkpoint that has not moved for the stall threshold), or when a transaction has held the
/// log's followers back for longer than its threshold; `problems` says which, in words. 503
/// `unavailable` when the database does not answer.
public struct HealthController: Sendable {
    struct Health: Encodable {
        struct Projection: Encodable {
            let name: String
            let version: Int
            let status: String
            let position: Int64
            let lagPositions: Int64
            let lagSeconds: Double
            let checkpointMovedAt: Date
            let stalled: Bool
            let error: String?
            let errorPosition: Int64?
        }

        struct Transaction: Encodable {
            let pid: Int32
            let ageSeconds: Double?
            let user: String?
            let application: String?
            let state: String?
        }

        struct Sync: Encodable {
            let app: String
            let environment: String
            @NullWhenAbsent var syncedThrough: Date?
            @NullWhenAbsent var lastRunAt: Date?
            @NullWhenAbsent var lastError: String?
            let behind: Bool
        }

        let status: String
        let database: String
        let logHead: Int64?
        let projections: [Projection]
        let followersHeldBy: Transaction?
        let problems: [String]
        var notificationSync: [Sync] = []
        var warnings: [String] = []
        let error: String?
    }

    let check: any HealthCheck
    let thresholds: LedgerHealth.Thresholds
    let availability: any DatabaseAvailability

    public init(check: any HealthCheck, thresholds: LedgerHealth.Thresholds = .init(), availability: any DatabaseAvailability) {
        self.check = RecentHealth(check, maximumAge: thresholds.readingKept)
        self.thresholds = thresholds
        self.availability = availability
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/health") { _, _ -> Response in
            if case .down(let since, let reason) = availability.state {
                return try APIJSON.response(
                    Health(status: "unavailable", database: "unreachable", logHead: nil, projections: [], followersHeldBy: nil, problems: [],
                           error: "the database does not answer since \(since.formatted(.iso8601)) (\(reason)); the ledger is not recording"),
                    status: .serviceUnavailable
                )
            }
            let health: LedgerHealth
            do {
                health = try await check.health(thresholds: thresholds)
            } catch {
                return try APIJSON.response(
                    Health(status: "unavailable", database: "unreachable", logHead: nil, projections: [], followersHeldBy: nil,
                           problems: [], error: "the database does not answer; the ledger is not recording"),
                    status: .serviceUnavailable
                )
            }
            return try APIJSON.response(Self.body(health, thresholds: thresholds), status: health.isDegraded ? .serviceUnavailable : .ok)
        }
    }

    static func body(_ health: LedgerHealth, thresholds: LedgerHealth.Thresholds) -> Health {
        Health(
            status: health.isDegraded ? "degraded" : "ok", database: "reachable", logHead: health.head,
            projections: health.projections.map {
                .init(name: $0.name, version: $0.version, status: $0.status.rawValue, position: $0.position,
                      lagPositions: $0.lagPositions, lagSeconds: $0.lagSeconds, checkpointMovedAt: $0.checkpointMovedAt,
                      stalled: $0.isStalled(after: thresholds.stall), error: $0.error, errorPosition: $0.errorPosition)
            },
            followersHeldBy: health.heldBy.map {
                .init(pid: $0.pid, ageSeconds: $0.seconds, user: $0.user, application: $0.application, state: $0.state)
            },
            problems: health.problems,
            notificationSync: health.notificationSync.map {
                .init(app: $0.app, environment: $0.environment.rawValue, syncedThrough: $0.syncedThrough, lastRunAt: $0.lastRunAt,
                      lastError: $0.lastError, behind: $0.behind)
            },
            warnings: health.warnings,
            error: nil
        )
    }
}

