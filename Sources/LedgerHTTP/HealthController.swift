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
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/health") { _, _ -> Response in
            do {
                let head = try await PostgresEventStore(client: client, logger: logger).headPosition()
                let projections = try await ProjectionStatus.all(client, logger: logger).filter { $0.status != .retired }
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
