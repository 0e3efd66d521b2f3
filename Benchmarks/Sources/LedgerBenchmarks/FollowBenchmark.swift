import AppStore
import AsyncHTTPClient
import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerRuntime
import LedgerStore
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import ServiceLifecycle
import Synchronization
import LedgerTesting

/// Following the ledger, over a seeded history: the change writer catching up with the log; one
/// consumer reading an app's feed through HTTP in pages, against the same keyset pages read with
/// one SQL statement each; and webhook delivery of the app's latest changes to an endpoint on
/// loopback that answers 200 at once.
public struct FollowBenchmark: Sendable {
    public struct Result: Sendable {
        public var writerEvents = 0
        public var writerChanges = 0
        public var writerSeconds = 0.0
        public var feedChanges = 0
        public var feedPages = 0
        public var feedSeconds = 0.0
        public var rawSeconds = 0.0
        public var deliveries = 0
        public var deliverySeconds = 0.0

        public var writerEventsPerSecond: Double { Double(writerEvents) / writerSeconds }
        public var feedRate: Double { Double(feedChanges) / feedSeconds }
        public var rawRate: Double { Double(feedChanges) / rawSeconds }
        public var feedRatio: Double { feedRate / rawRate }
        public var deliveryRate: Double { Double(deliveries) / deliverySeconds }
    }

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The app with the most changes, once the writer has caught up.
    public func run(pageSize: Int, deliveries wanted: Int, progress: @escaping @Sendable (String) -> Void = { _ in }) async throws -> Result {
        var result = Result()
        let writer = ChangeWriter(client: client, listenConfiguration: nil, logger: logger)
        // Written afresh from position 0 on every run, so the writer's figure covers the whole log.
        try await client.withConnection { connection in
            try await connection.query("BEGIN", logger: logger)
            try await connection.query("DELETE FROM ledger.changes", logger: logger)
            try await connection.query("DELETE FROM ledger.change_deadlines", logger: logger)
            try await connection.query("UPDATE ledger.change_writer SET position = 0", logger: logger)
            try await connection.query("COMMIT", logger: logger)
        }
        progress("writing the change feed from the log")
        let writing = ContinuousClock.now
        result.writerEvents = try await writer.catchUp()
        result.writerSeconds = seconds(since: writing)
        let counts = try await client.query(
            "SELECT app, count(*) FROM ledger.changes GROUP BY app ORDER BY count(*) DESC, app", logger: logger
        ).collect().map { try $0.decode((String, Int).self) }
        result.writerChanges = counts.reduce(0) { $0 + $1.1 }
        guard let app = counts.first?.0 else { throw StoreError.invalidInput("the log holds no change to follow: seed it first (`ledger-bench seed`)") }

        let registry = AppRegistry(client: client, logger: logger)
        // The seeder writes the log only: its apps are registered here when they are not yet.
        _ = try await registry.addApp(app, sharedSecret: nil)
        let key = try await registry.createKey(app: app, scopes: [.read]).token
        progress("reading \(app)'s feed through HTTP, pages of \(pageSize)")
        let server = LedgerServer(configuration: .init(host: "127.0.0.1", port: 0), client: client, verifier: RefusingVerifier(), logger: logger)
        let port = ServerPort()
        let application = server.application(services: []) { port.report($0) }
        try await withRunningServices([application], logger: logger) {
            let base = "http://127.0.0.1:\(try await port.value())"
            let reading = ContinuousClock.now
            var cursor = "0"
            while true {
                var request = HTTPClientRequest(url: "\(base)/v1/apps/\(app)/changes?after=\(cursor)&limit=\(pageSize)")
                request.headers.add(name: "Authorization", value: "Bearer \(key)")
                let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
                let body = try await response.body.collect(upTo: 256 * 1024 * 1024)
                guard response.status == .ok else { throw StoreError.invalidInput("the feed answered \(response.status): \(String(buffer: body))") }
                let page = try JSONDecoder().decode(Page.self, from: Data(body.readableBytesView))
                result.feedChanges += page.changes.count
                result.feedPages += 1
                cursor = String(page.position)
                if !page.more { break }
            }
            result.feedSeconds = seconds(since: reading)
        }

        progress("reading the same pages with one SQL statement each")
        let raw = ContinuousClock.now
        var position: Int64 = 0
        var seq: Int32 = .max
        while true {
            var text = "{\"changes\":["
            var last: (Int64, Int32)?
            try await client.forEachRow(
                """
                SELECT position, seq, body FROM ledger.changes WHERE app = \(app) AND (position, seq) > (\(position), \(seq))
                ORDER BY position, seq LIMIT \(pageSize)
                """,
                logger: logger
            ) { row in
                let (at, number, body) = try row.decode((Int64, Int32, String).self)
                if last != nil { text += "," }
                text += body
                last = (at, number)
            }
            text += "]}"
            guard let last else { break }
            (position, seq) = last
        }
        result.rawSeconds = seconds(since: raw)

        result.deliveries = min(wanted, result.feedChanges)
        if result.deliveries > 0 {
            progress("delivering \(app)'s last \(result.deliveries) changes to a webhook endpoint on loopback")
            result.deliverySeconds = try await deliver(last: result.deliveries, of: app)
        }
        return result
    }

    /// Seconds until an endpoint added before the app's last `count` changes has them all.
    private func deliver(last count: Int, of app: String) async throws -> Double {
        let from = try await client.query(
            "SELECT position FROM ledger.changes WHERE app = \(app) ORDER BY position DESC, seq DESC OFFSET \(count) LIMIT 1", logger: logger
        ).collect().first?.decode(Int64.self) ?? 0
        let received = ReceivedCount()
        let router = Router()
        router.post("hook") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            received.add()
            return Response(status: .ok)
        }
        let port = ServerPort()
        let receiver = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "bench-receiver"),
                                   onServerRunning: { port.report($0.localAddress?.port ?? 0) }, logger: logger)
        return try await withRunningServices([receiver], logger: logger) {
            let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "the benchmark's key")
            let store = PostgresWebhooks(client: client, secrets: secrets, logger: logger)
            let manage = ManageWebhooks(store: store, directory: AppRegistry(client: client, logger: logger, secrets: secrets))
            let http = HTTPWebhookSender.makeHTTPClient()
            let delivery = WebhookDelivery(store: store, sender: HTTPWebhookSender(client: http), logger: logger)
            let start = ContinuousClock.now
            let endpoint = try await manage.add(app: app, url: "http://127.0.0.1:\(try await port.value())/hook", fromPosition: from)
            let worker = Task { await delivery.run() }
            defer { worker.cancel() }
            while true {
                let rows = try await client.query(
                    """
                    SELECT count(*) FILTER (WHERE status = 'delivered'), count(*) FILTER (WHERE status <> 'delivered')
                    FROM ledger.webhook_deliveries WHERE endpoint_id = \(endpoint.endpoint.id)
                    """,
                    logger: logger
                ).collect()
                let (delivered, left) = try rows.first?.decode((Int, Int).self) ?? (0, 0)
                if delivered >= count && left == 0 { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let elapsed = seconds(since: start)
            worker.cancel()
            await worker.value
            try await http.shutdown()
            _ = try await manage.remove(id: endpoint.endpoint.id, app: app)
            return elapsed
        }
    }

    private func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    private struct Page: Decodable {
        struct Change: Decodable { let id: String }
        let changes: [Change]
        let position: Int64
        let more: Bool
    }
}

/// Deliveries the benchmark's endpoint received.
private final class ReceivedCount: Sendable {
    private let count = Mutex(0)
    func add() { count.withLock { $0 += 1 } }
}

/// The benchmark posts no receipt: any verification is refused.
private struct RefusingVerifier: ReceiptVerifier {
    func verify(_ request: ReceiptVerificationRequest, logger: Logger) async throws -> VerifiedReceipt {
        throw ReceiptVerificationError.unavailable("the follow benchmark verifies no receipt")
    }
}
