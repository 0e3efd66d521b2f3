import AppStore
import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import LedgerTesting
import Logging
import NIOCore
import NIOHTTP1
import LedgerRuntime
import PostgresNIO

/// What recovering missed notifications costs: a walk of Apple's notification history (the
/// simulator's, on loopback) that finds most notifications in the log and records the missing
/// ones through the webhook's intake (`SyncNotifications`), against a raw baseline in the same
/// run: the same pages fetched with the same token, their payloads decoded without verification,
/// one SELECT of the deduplication keys per page, and the missing rows INSERTed into a plain table.
///
/// The notifications are Apple-shaped ONE_TIME_CHARGEs of made-up transactions, signed by the
/// simulator's certificate authority (a chain like Apple's). Apple never delivers them (the
/// simulator's switch for lost deliveries), so the log learns of them only from the history: a
/// first walk records all but `missing`, then `missing` more are sent, then the timed walk covers
/// the whole window again.
public struct NotificationSyncBenchmark: Sendable {
    public struct Options: Sendable {
        public var notifications: Int
        public var missing: Int

        public init(notifications: Int = 10_000, missing: Int = 100) {
            self.notifications = notifications
            self.missing = missing
        }
    }

    public struct Result: Sendable {
        public let notifications: Int
        /// The first walk, which recorded every notification but the missing ones.
        public let primingSeconds: Double
        public let primed: Int
        /// The timed walk: what it saw and recovered, and how long it took.
        public let seen: Int
        public let recovered: Int
        public let seconds: Double
        /// The raw baseline over the same window.
        public let baselineSeen: Int
        public let baselineInserted: Int
        public let baselineSeconds: Double

        public var ratio: Double { seconds / baselineSeconds }
    }

    static let app = "com.example.sync-bench"

    let client: DatabasePool
    let logger: Logger

    public init(client: DatabasePool, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    public func run(_ options: Options) async throws -> Result {
        guard options.notifications >= 1, (0...options.notifications).contains(options.missing) else {
            throw StoreError.invalidInput("a sync benchmark needs at least 1 notification and 0 to all of them missing")
        }
        let authority = try SimulatorCertificateAuthority()
        let port = ServerPort()
        let simulator = try AppStoreSimulator(
            configuration: .init(host: "127.0.0.1", port: 0, environment: .sandbox, authority: authority, notificationRetryDelays: []),
            logger: logger
        ) { port.report($0) }
        return try await withRunningServices([simulator], logger: logger) {
            let base = "http://127.0.0.1:\(try await port.value())"
            try await Self.admin(.PUT, base + "/admin/apps/\(Self.app)", ["notificationURL": "http://127.0.0.1:1/never"])
            try await Self.admin(.PUT, base + "/admin/apps/\(Self.app)/notifications/dropped", ["dropped": true])
            let made = try await Self.admin(.POST, base + "/admin/apps/\(Self.app)/api-keys", nil)
            guard let keyID = made["keyId"] as? String, let issuerID = made["issuerId"] as? String, let pem = made["privateKey"] as? String else {
                throw StoreError.invalidInput("the simulator made no API key")
            }
            let key = ServerAPIKey(keyID: keyID, issuerID: issuerID, privateKeyPEM: pem)
            let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "the sync benchmark's key")
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            try await registry.addApp(Self.app, sharedSecret: nil)
            try await registry.setServerAPIKey(key, of: Self.app)
            let verifier = SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, authority.root])
            let api = AppStoreServerAPI(configuration: .init(productionURL: base + "/production", sandboxURL: base + "/sandbox", timeout: .seconds(60)),
                                        verifier: verifier)
            let ledger = PostgresLedger(client: client, secrets: secrets, history: api, logger: logger)
            guard let sync = ledger.syncNotifications else { throw StoreError.invalidInput("the ledger has no Server API client") }

            let since = Date().addingTimeInterval(-60)
            try await Self.synthetic(base, count: options.notifications - options.missing)
            let clock = ContinuousClock()
            var start = clock.now
            let primed = options.notifications > options.missing ? try await sync(app: Self.app, environment: .sandbox, since: since).recovered : 0
            let primingSeconds = (clock.now - start).inSeconds
            // The baseline's table holds what the log holds before the timed walk.
            try await prepareBaseline()
            try await Self.synthetic(base, count: options.missing)

            start = clock.now
            let report = try await sync(app: Self.app, environment: .sandbox, since: since)
            let seconds = (clock.now - start).inSeconds

            start = clock.now
            let (baselineSeen, inserted) = try await baseline(base: base, key: AppStoreServerAPIKey(keyID: keyID, issuerID: issuerID, privateKeyPEM: pem),
                                                              since: since)
            let baselineSeconds = (clock.now - start).inSeconds
            try await client.query("DROP TABLE bench_sync_raw", logger: logger)
            return Result(notifications: options.notifications, primingSeconds: primingSeconds, primed: primed, seen: report.seen,
                          recovered: report.recovered, seconds: seconds, baselineSeen: baselineSeen, baselineInserted: inserted,
                          baselineSeconds: baselineSeconds)
        }
    }

    /// A plain table of the notification keys the log holds now.
    private func prepareBaseline() async throws {
        try await client.query("DROP TABLE IF EXISTS bench_sync_raw", logger: logger)
        try await client.query("CREATE TABLE bench_sync_raw (dedup_key text PRIMARY KEY, payload text NOT NULL)", logger: logger)
        try await client.query("""
            INSERT INTO bench_sync_raw SELECT dedup_key, data::text FROM ledger.events
            WHERE event_type = 'AppStoreNotificationReceived.v1' AND dedup_key IS NOT NULL
            """, logger: logger)
    }

    struct Page: Decodable {
        struct Item: Decodable { let signedPayload: String }
        let notificationHistory: [Item]
        let hasMore: Bool
        let paginationToken: String?
    }

    struct Claims: Decodable { let notificationUUID: String }

    /// The same walk without the ledger: pages fetched and decoded, the payloads' UUIDs read
    /// without verification, one SELECT per page, the missing INSERTed.
    private func baseline(base: String, key: AppStoreServerAPIKey, since: Date) async throws -> (seen: Int, inserted: Int) {
        let body = try JSONSerialization.data(withJSONObject: ["startDate": since.milliseconds, "endDate": Date().milliseconds])
        var token: String?
        var seen = 0
        var inserted = 0
        repeat {
            var request = HTTPClientRequest(url: base + "/sandbox/inApps/v1/notifications/history" + (token.map { "?paginationToken=\($0)" } ?? ""))
            request.method = .POST
            request.headers.add(name: "Authorization", value: "Bearer \(try AppStoreServerAPI.token(key: key, bundleId: Self.app, now: Date()))")
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await HTTPClient.shared.execute(request, timeout: .seconds(60))
            let bytes = try await response.body.collect(upTo: 16 << 20)
            let page = try JSONDecoder().decode(Page.self, from: Data(bytes.readableBytesView))
            var keys: [String: String] = [:]
            for item in page.notificationHistory {
                let parts = item.signedPayload.split(separator: ".")
                guard parts.count == 3, let payload = Base64URL.decode(String(parts[1])) else { continue }
                let uuid = try JSONDecoder().decode(Claims.self, from: payload).notificationUUID
                keys["appstore/\(Self.app)/sandbox/notification/\(uuid)"] = item.signedPayload
            }
            seen += page.notificationHistory.count
            var known: Set<String> = []
            let rows = try await client.query("SELECT dedup_key FROM bench_sync_raw WHERE dedup_key = ANY(\(Array(keys.keys)))", logger: logger)
            for try await found in rows.decode(String.self) { known.insert(found) }
            for (key, payload) in keys where !known.contains(key) {
                try await client.query("INSERT INTO bench_sync_raw VALUES (\(key), \(payload))", logger: logger)
                inserted += 1
            }
            token = page.hasMore ? page.paginationToken : nil
        } while token != nil
        return (seen, inserted)
    }

    private static func synthetic(_ base: String, count: Int) async throws {
        var left = count
        while left > 0 {
            let batch = min(left, 5_000)
            try await admin(.POST, base + "/admin/apps/\(app)/notifications/synthetic", ["count": batch, "productId": "coins"])
            left -= batch
        }
    }

    @discardableResult
    private static func admin(_ method: HTTPMethod, _ url: String, _ json: [String: Any]?) async throws -> [String: Any] {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
        }
        let response = try await HTTPClient.shared.execute(request, timeout: .seconds(120))
        let bytes = try await response.body.collect(upTo: 1 << 20)
        guard (200..<300).contains(response.status.code) else {
            throw StoreError.invalidInput("the simulator answered \(response.status.code) to \(method) \(url): \(String(buffer: bytes))")
        }
        return (try? JSONSerialization.jsonObject(with: Data(bytes.readableBytesView))) as? [String: Any] ?? [:]
    }
}
