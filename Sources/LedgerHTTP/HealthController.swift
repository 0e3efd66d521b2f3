import Foundation
import Hummingbird
import LedgerStore
import Logging

/// `GET /health`: no auth; says whether the database answers and how far the log has come.
public struct HealthController: Sendable {
    struct Health: ResponseEncodable {
        let status: String
        let database: String
        let logHead: Int64?
        let error: String?
    }

    let store: PostgresEventStore

    public init(store: PostgresEventStore) {
        self.store = store
    }

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/health") { _, _ -> Response in
            do {
                let head = try await store.headPosition()
                return try Self.response(.ok, Health(status: "ok", database: "reachable", logHead: head, error: nil))
            } catch {
                return try Self.response(
                    .serviceUnavailable,
                    Health(status: "unavailable", database: "unreachable", logHead: nil,
                           error: "the database does not answer; the ledger is not recording")
                )
            }
        }
    }

    private static func response(_ status: HTTPResponse.Status, _ body: Health) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(body))))
    }
}
