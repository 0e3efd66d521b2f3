import AppStore
import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerRuntime
import LedgerStore
import LedgerTesting
import Logging
import NIOCore
import NIOHTTP1
import PostgresNIO
import ServiceLifecycle

/// The ledger as the fuzzer drives it, all in this process on loopback over the caller's database:
/// the App Store simulator, the ledger's server verifying receipts with it, the projection runner,
/// and a second server of the same ledger whose App Store answers whatever the fuzzer scripts
/// (`ScriptedAppStore`), so mutated `verifyReceipt` answers travel the whole real path too.
///
/// Before the cases, an app is registered with the simulator's shared secret, products of every
/// type are defined in both, test users buy, renew and get refunds, and their receipts are
/// recorded: the real bodies the cases mutate, and real transactions to finish, revoke and consume.
public struct LedgerFuzzWorld: Sendable {
    public static let app = "com.example.fuzz"
    static let users = ["fuzz-ann", "fuzz-ben", "fuzz-cid"]

    /// The ledger verifying with the simulator.
    let ledgerBase: String
    /// The same ledger verifying with `scripted`.
    let scriptedLedgerBase: String
    let simulatorBase: String
    let scripted: ScriptedAppStore
    /// A key of `app` with every scope.
    let key: String
    let client: DatabasePool
    /// Seals the app's shared secret (a key of this run only: the scratch database is dropped).
    let secrets: SecretSealer
    let http: HTTPClient
    let logger: Logger
    /// Signs the simulator's StoreKit 2 transactions and the fuzzer's notifications; the ledger trusts its root.
    let authority: SimulatorCertificateAuthority

    /// Each user's app receipt, as the simulator issued it after the purchases.
    public private(set) var receipts: [(user: String, receipt: String)] = []
    /// Transactions the ledger recorded, with their users.
    public private(set) var transactions: [(user: String, transactionId: String)] = []
    /// The simulator's `verifyReceipt` answers to those receipts, and to per-transaction receipts.
    public private(set) var simulatorAnswers: [Data] = []
    /// Each user's transactions as StoreKit 2 signs them (`Transaction.all`).
    public private(set) var signedTransactions: [(user: String, jws: String)] = []

    /// Runs `body` with a world over `client` (a migrated database; `settings` let the projection
    /// runner listen for commits), then shuts everything down.
    public static func run<T: Sendable>(
        client: DatabasePool, settings: DatabaseSettings, logger: Logger,
        _ body: @Sendable (LedgerFuzzWorld) async throws -> T
    ) async throws -> T {
        LedgerMetrics.bootstrap()
        let http = HTTPClient(eventLoopGroupProvider: .singleton)
        do {
            let result = try await run(client: client, settings: settings, http: http, logger: logger, body)
            try await http.shutdown()
            return result
        } catch {
            try? await http.shutdown()
            throw error
        }
    }

    private static func run<T: Sendable>(
        client: DatabasePool, settings: DatabaseSettings, http: HTTPClient, logger: Logger,
        _ body: @Sendable (LedgerFuzzWorld) async throws -> T
    ) async throws -> T {
        let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "the fuzzer's key of this run")
        let authority = try SimulatorCertificateAuthority()
        let simulatorPort = ServerPort(), scriptedPort = ServerPort(), ledgerPort = ServerPort(), scriptedLedgerPort = ServerPort()
        let simulator = try AppStoreSimulator(configuration: .init(host: "127.0.0.1", port: 0, environment: .sandbox, authority: authority), logger: logger) {
            simulatorPort.report($0)
        }
        let scripted = ScriptedAppStore()
        let scriptedServer = scripted.application(logger: logger) { scriptedPort.report($0) }
        return try await withRunningServices([simulator, scriptedServer], logger: logger, onExit: { simulatorPort.stopped(); scriptedPort.stopped() }) {
            let simulatorBase = "http://127.0.0.1:\(try await simulatorPort.value())"
            let scriptedBase = "http://127.0.0.1:\(try await scriptedPort.value())"
            let verifiedBySimulator = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
                productionURL: simulatorBase + "/production/verifyReceipt", sandboxURL: simulatorBase + "/sandbox/verifyReceipt",
                timeout: .seconds(10), retry: .none
            ), httpClient: http)
            let verifiedByScript = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
                productionURL: scriptedBase + "/production/verifyReceipt", sandboxURL: scriptedBase + "/sandbox/verifyReceipt",
                timeout: .seconds(10), retry: .none
            ), httpClient: http)
            let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger)
            try await runner.prepare()
            // As `ledger serve --trust-simulator-root` does: the simulator's signatures are accepted.
            let configuration = LedgerServer.Configuration(
                host: "127.0.0.1", port: 0,
                api: .init(signedPayloads: SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, authority.root]))
            )
            let ledger = LedgerServer(configuration: configuration, client: client, verifier: verifiedBySimulator, secrets: secrets, logger: logger)
                .application(services: [runner]) { ledgerPort.report($0) }
            let scriptedLedger = LedgerServer(configuration: configuration, client: client, verifier: verifiedByScript, secrets: secrets, logger: logger)
                .application(services: []) { scriptedLedgerPort.report($0) }
            return try await withRunningServices([ledger, scriptedLedger], logger: logger, onExit: { ledgerPort.stopped(); scriptedLedgerPort.stopped() }) {
                var world = LedgerFuzzWorld(
                    ledgerBase: "http://127.0.0.1:\(try await ledgerPort.value())",
                    scriptedLedgerBase: "http://127.0.0.1:\(try await scriptedLedgerPort.value())",
                    simulatorBase: simulatorBase, scripted: scripted, key: "", client: client, secrets: secrets, http: http, logger: logger,
                    authority: authority
                )
                try await world.populate()
                return try await body(world)
            }
        }
    }

    /// The app's catalog as the world defines it in the ledger; the parser's cases are folded with it too.
    public static var products: [Product] {
        let defined: [Product?] = [
            try? Product(productId: "coins", type: .consumable, prices: ["USD": "0.99", "EUR": "0.99"]),
            try? Product(productId: "levels", type: .nonConsumable, prices: ["USD": "2.99"]),
            try? Product(productId: "monthly", type: .autoRenewable, duration: ISODuration(parsing: "P1M"), subscriptionGroup: "premium", prices: ["USD": "4.99"]),
            try? Product(productId: "yearly", type: .autoRenewable, duration: ISODuration(parsing: "P1Y"), subscriptionGroup: "premium", prices: ["USD": "39.99"]),
            try? Product(productId: "season", type: .nonRenewing, duration: ISODuration(parsing: "P1M"), subscriptionGroup: "season", prices: ["USD": "1.99"]),
        ]
        return defined.compactMap { $0 }
    }

    // MARK: Setting the scene

    private mutating func populate() async throws {
        let app = Self.app
        let created = try await simulator(.PUT, "/admin/apps/\(app)", nil)
        guard let secret = created.json?["sharedSecret"] as? String else {
            throw FuzzSetupError("the simulator did not create \(app): \(created.text)")
        }
        let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
        try await registry.addApp(app, sharedSecret: secret)
        let key = try await registry.createKey(app: app, scopes: Set(APIScope.allCases), name: "fuzz").token
        self = LedgerFuzzWorld(
            ledgerBase: ledgerBase, scriptedLedgerBase: scriptedLedgerBase, simulatorBase: simulatorBase, scripted: scripted,
            key: key, client: client, secrets: secrets, http: http, logger: logger, authority: authority
        )
        // The simulator's products, then the same in the ledger's catalog.
        let simulated: [String: [String: Any]] = [
            "coins": ["type": "consumable"], "levels": ["type": "non_consumable"],
            "monthly": ["type": "auto_renewable", "duration": "P1M", "group": "premium", "level": 2],
            "yearly": ["type": "auto_renewable", "duration": "P1Y", "group": "premium", "level": 1],
            "season": ["type": "non_renewing", "duration": "P1M"],
        ]
        for product in Self.products {
            try await expect(200, simulator(.PUT, "/admin/apps/\(app)/products/\(product.productId)", simulated[product.productId]))
            var defined: [String: Any] = ["type": product.type.rawValue, "group": product.subscriptionGroup, "prices": product.prices]
            if let duration = product.duration { defined["duration"] = duration.description }
            try await expect(200, ledger(.PUT, "/v1/apps/\(app)/products/\(product.productId)", defined))
        }
        var transactionReceipts: [String] = []
        for (index, user) in Self.users.enumerated() {
            try await expect(201, simulator(.POST, "/admin/users", ["userId": user]))
            for product in ["coins", "levels", "monthly", "season"] {
                let bought = try await simulator(.POST, "/admin/purchases", ["userId": user, "bundleId": app, "productId": product, "quantity": product == "coins" ? 10 : 1])
                guard bought.status == 201, let receipt = bought.json?["transactionReceipt"] as? String else {
                    throw FuzzSetupError("the simulator refused \(user)'s purchase of \(product): \(bought.text)")
                }
                transactionReceipts.append(receipt)
            }
            if index == 1, let refunded = try await simulator(.GET, "/admin/users/\(user)/apps/\(app)", nil).json?["transactions"] as? [[String: Any]],
               let levels = refunded.first(where: { $0["productId"] as? String == "levels" })?["transactionId"] as? String {
                try await expect(200, simulator(.POST, "/admin/transactions/\(levels)/cancel", ["reason": 1]))
            }
        }
        // Six minutes: one sandbox renewal of the monthly subscriptions.
        try await expect(200, simulator(.POST, "/admin/clock/advance", ["minutes": 6]))
        try await expect(201, simulator(.POST, "/admin/purchases", ["userId": Self.users[2], "bundleId": app, "productId": "yearly"]), or: 202)

        for user in Self.users {
            let listed = try await simulator(.GET, "/admin/users/\(user)/apps/\(app)", nil).json
            guard let receipt = listed?["receipt"] as? String else {
                throw FuzzSetupError("the simulator gave no receipt for \(user)")
            }
            signedTransactions += (listed?["signedTransactions"] as? [String] ?? []).map { (user, $0) }
            receipts.append((user, receipt))
            let recorded = try await ledger(.POST, "/v1/apps/\(app)/receipts", ["userId": user, "deviceId": "\(user)-phone", "receiptData": receipt])
            guard recorded.status == 200, let items = recorded.json?["recorded"] as? [[String: Any]] else {
                throw FuzzSetupError("the ledger refused \(user)'s receipt: \(recorded.status) \(recorded.text)")
            }
            for case let id? in items.map({ $0["transactionId"] as? String }) where !transactions.contains(where: { $0.transactionId == id }) {
                transactions.append((user, id))
            }
        }
        for receipt in receipts.map(\.receipt) + transactionReceipts {
            let answer = try await Self.exchange(http, .POST, simulatorBase + "/sandbox/verifyReceipt", headers: [],
                                                 body: try JSONSerialization.data(withJSONObject: ["receipt-data": receipt, "password": secret]))
            simulatorAnswers.append(answer.body)
        }
    }

    // MARK: Requests

    struct Answer: Sendable {
        let status: Int
        let body: Data

        var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] }
        var text: String { String(decoding: body.prefix(2_000), as: UTF8.self) }
    }

    private func simulator(_ method: HTTPMethod, _ path: String, _ json: [String: Any]?) async throws -> Answer {
        try await Self.exchange(http, method, simulatorBase + path, headers: [("Content-Type", "application/json")],
                                body: try json.map { try JSONSerialization.data(withJSONObject: $0) })
    }

    private func ledger(_ method: HTTPMethod, _ path: String, _ json: [String: Any]) async throws -> Answer {
        try await Self.exchange(http, method, ledgerBase + path, headers: [("Content-Type", "application/json"), ("Authorization", "Bearer \(key)")],
                                body: try JSONSerialization.data(withJSONObject: json))
    }

    private func expect(_ status: Int, _ answer: Answer, or other: Int? = nil) throws {
        guard answer.status == status || answer.status == other else {
            throw FuzzSetupError("expected HTTP \(status), got \(answer.status): \(answer.text)")
        }
    }

    /// One request; throws only when no answer came (the connection failed or was dropped).
    static func exchange(_ http: HTTPClient, _ method: HTTPMethod, _ url: String, headers: [(String, String)], body: Data?) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await http.execute(request, timeout: .seconds(60))
        let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        return Answer(status: Int(response.status.code), body: Data(bytes.readableBytesView))
    }

    // MARK: What the log holds

    /// What a refused request must leave as it was: the log's last position (an append always
    /// takes a new one; nothing can change a recorded row) and the receipts and answers kept.
    struct LogSnapshot: Equatable, CustomStringConvertible {
        let lastPosition: Int64
        let receipts: Int64
        let answers: Int64

        var description: String { "log position \(lastPosition), \(receipts) receipts and \(answers) App Store answers kept" }
    }

    func snapshot() async throws -> LogSnapshot {
        let rows = try await client.query(
            """
            SELECT coalesce((SELECT max(position) FROM ledger.events), 0)::bigint,
                   (SELECT count(*) FROM ledger.receipts)::bigint,
                   (SELECT count(*) FROM ledger.receipt_answers)::bigint
            """,
            logger: logger
        )
        for try await (position, receipts, answers) in rows.decode((Int64, Int64, Int64).self) {
            return LogSnapshot(lastPosition: position, receipts: receipts, answers: answers)
        }
        throw FuzzSetupError("the log snapshot returned no row")
    }

    /// The events in the log (`count(*)`, not part of the snapshot: it reads the whole table).
    func eventCount() async throws -> Int64 {
        for try await count in try await client.query("SELECT count(*) FROM ledger.events", logger: logger).decode(Int64.self) {
            return count
        }
        throw FuzzSetupError("the event count returned no row")
    }

    /// Waits (up to `timeout`) for every projection to reach the log's end; returns the ones that
    /// failed, with why and where.
    func failedProjections(timeout: Duration = .seconds(120)) async throws -> [String] {
        let deadline = ContinuousClock.now + timeout
        while true {
            let rows = try await client.query(
                """
                SELECT name, version, status, coalesce(error, ''), coalesce(error_position, 0),
                       position >= coalesce((SELECT max(position) FROM ledger.events), 0)
                FROM ledger.projections WHERE status <> 'retired'
                """,
                logger: logger
            )
            var failed: [String] = []
            var behind = false
            for try await (name, version, status, error, position, caughtUp) in rows.decode((String, Int32, String, String, Int64, Bool).self) {
                if status == "failed" { failed.append("\(name) v\(version) failed at position \(position): \(error)") }
                if !caughtUp { behind = true }
            }
            if !failed.isEmpty || !behind || ContinuousClock.now >= deadline { return failed }
            try await Task.sleep(for: .milliseconds(200))
        }
    }
}
