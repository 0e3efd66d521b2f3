import Foundation
import Hummingbird
import LedgerStore
import Logging
import PostgresNIO

/// `GET /health`: no auth; whether the database answers, how far the log has come and how far
/// behind each projection is. 200 when the database answers and no projection has failed, else 503.
public struct HealthController: Sendable {
    struct Health: Encodable {
        struct Projection: Encodable {
            let name: String
            let version: Int
            let status: String
            let position: Int64
            let lagEvents: Int64
            let lagSeconds: Double
        }

        let status: String
        let database: String
        let logHead: Int64?
        let projections: [Projection]
        let error: String?
    }

    let client: PostgresClient
    let monitor: DatabaseMonitor?
    let logger: Logger

    public init(client: PostgresClient, monitor: DatabaseMonitor? = nil, logger: Logger) {
        self.client = client
        self.monitor = monitor
        self.logger = logger
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/health") { _, _ -> Response in
            if case .down(let since, let reason) = monitor?.state {
                return try APIJSON.response(
                    Health(status: "unavailable", database: "unreachable", logHead: nil, projections: [],
                           error: "the database does not answer since \(since.formatted(.iso8601)) (\(reason)); the ledger is not recording"),
                    status: .serviceUnavailable
                )
            }
            do {
                // Answered within about a second even when the database stops answering mid-way:
                // the pool would queue the reads until it gives up.
                let read = try await withThrowingTaskGroup(of: (Int64, [ProjectionStatus])?.self) { group in
                    group.addTask { [client, logger] in
                        let head = try await PostgresEventStore(client: client, logger: logger).headPosition()
                        return (head, try await ProjectionStatus.all(client, logger: logger))
                    }
                    // Given up on when the monitor sees the database down (it probes every second), or
                    // after 10 s of a database that answers too slowly to call healthy.
                    group.addTask { [monitor] in
                        await withTaskGroup(of: Void.self) { race in
                            if let monitor { race.addTask { await monitor.waitUntilDown() } }
                            race.addTask { try? await Task.sleep(for: .seconds(10)) }
                            await race.next()
                            race.cancelAll()
                        }
                        return nil
                    }
                    defer { group.cancelAll() }
                    return try await group.next() ?? nil
                }
                guard let (head, statuses) = read else { throw HealthTimeout() }
                let projections = statuses.filter { $0.status != .retired }
                let failed = projections.filter { $0.status == .failed }.map(\.name)
                return try APIJSON.response(
                    Health(
                        status: failed.isEmpty ? "ok" : "degraded", database: "reachable", logHead: head,
                        projections: projections.map {
                            .init(name: $0.name, version: $0.version, status: $0.status.rawValue, position: $0.position,
                                  lagEvents: $0.lagEvents, lagSeconds: $0.lagSeconds)
                        },
                        error: failed.isEmpty ? nil : "projections failed: \(failed.joined(separator: ", ")); `ledger projections status` says why"
                    ),
                    status: failed.isEmpty ? .ok : .serviceUnavailable
                )
            } catch {
                return try APIJSON.response(
                    Health(status: "unavailable", database: "unreachable", logHead: nil, projections: [],
                           error: "the database does not answer; the ledger is not recording"),
                    status: .serviceUnavailable
                )
            }
        }
    }
}

/// The database did not answer `/health`'s reads within a second.
private struct HealthTimeout: Error {}
