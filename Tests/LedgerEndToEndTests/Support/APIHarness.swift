import AppStore
import AppStoreSimulator
import AsyncHTTPClient
import Foundation
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
import Testing

/// A whole ledger for one test: its own database, the App Store simulator, the HTTP server and the
/// projection runner, all on loopback; an app registered with the simulator's shared secret, and a
/// key per scope set.
struct APIHarness: Sendable {
    static let app = "com.example.game"

    let base: String
    let simulatorBase: String
    /// With `run(productionSimulator: true)`: a second simulator, of the production environment,
    /// behind the verifier's production URL (the first stays behind its sandbox URL).
    var productionSimulatorBase: String? = nil
    let client: DatabasePool
    let settings: DatabaseSettings
    /// Keys of `app`: all scopes, and one per scope.
    let keys: [String: String]
    /// The key the app's shared secret is sealed with, as the server has it.
    let secrets: SecretSealer
    /// What the server keeps in memory and follows the database's announcements with.
    var changes: ChangeFeed? = nil
    /// The simulator's test authority, which the harness's ledger trusts besides Apple's root.
    var authority: SimulatorCertificateAuthority? = nil

    /// How long the server's reads wait for the projections (`run(readWait:)`).
    var readWait: Duration = .seconds(30)

    var allKey: String { keys["all"]! }

    struct Answer: Sendable {
        let status: Int
        let headers: HTTPHeaders
        let body: Data

        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
        var errorCode: String? { (json["error"] as? [String: Any])?["code"] as? String }
        var errorMessage: String? { (json["error"] as? [String: Any])?["message"] as? String }
        var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// One request to the ledger; `json` is serialized, `raw` is sent as is.
    func send(
        _ method: HTTPMethod, _ path: String, key: String?, json: Any? = nil, raw: Data? = nil, headers: [(String, String)] = []
    ) async throws -> Answer {
        var answer = try await Self.send(method, base + path, key: key, json: json, raw: raw, headers: headers)
        // A read still behind after the full wait is retried, as the answer says a client may: with
        // the whole suite on two cores, a test's projections once had not reached its post within
        // 30 s. Tests of the refusal itself wait briefly (`run(readWait:)`) and see it.
        var tries = 1
        while method == .GET && readWait >= .seconds(30) && tries < 3 && answer.status == 503 && answer.errorCode == "projections_behind" {
            answer = try await Self.send(method, base + path, key: key, json: json, raw: raw, headers: headers)
            tries += 1
        }
        return answer
    }

    static func send(
        _ method: HTTPMethod, _ url: String, key: String?, json: Any? = nil, raw: Data? = nil, headers: [(String, String)] = [],
        timeout: TimeAmount = .seconds(60)
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        if let key { request.headers.add(name: "Authorization", value: "Bearer \(key)") }
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: json)))
        } else if let raw {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: raw))
        }
        let response: HTTPClientResponse
        do {
            response = try await HTTPClient.shared.execute(request, timeout: timeout)
        } catch where method == .GET && Self.lostKeptConnection(error) {
            // The shared client lent a kept-alive connection its server had just closed (an
            // earlier test's server, on a port this one reuses): a read is sent again.
            response = try await HTTPClient.shared.execute(request, timeout: timeout)
        }
        let bytes = try await response.body.collect(upTo: 64 * 1024 * 1024)
        let answer = Answer(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
        if let path = URL(string: url)?.path, !url.contains("/admin/"), !url.contains("/verifyReceipt") {
            let query = URL(string: url)?.query.map { "?" + $0 } ?? ""
            for problem in OpenAPIConformance.problems(
                method: method.rawValue, path: path + query, status: answer.status,
                contentType: response.headers.first(name: "Content-Type"), body: answer.body
            ) {
                Issue.record("the answer does not match /openapi.json: \(problem)")
            }
        }
        return answer
    }

    static func lostKeptConnection(_ error: any Error) -> Bool {
        if let error = error as? ChannelError, error == .ioOnClosedChannel { return true }
        if let error = error as? HTTPClientError, error == .remoteConnectionClosed { return true }
        // The old server's socket answered the first write with a reset (seen in CI under load:
        // "read(descriptor:pointer:size:): Connection reset by peer").
        if let error = error as? IOError, error.errnoCode == ECONNRESET { return true }
        return false
    }

    // MARK: The simulator's admin API

    func simulator(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> Answer {
        try await Self.send(method, simulatorBase + path, key: nil, json: body)
    }

    /// The production simulator's admin API (`run(productionSimulator: true)` only).
    func productionSimulator(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> Answer {
        guard let productionSimulatorBase else { throw HarnessError(message: "run the harness with productionSimulator: true") }
        return try await Self.send(method, productionSimulatorBase + path, key: nil, json: body)
    }

    /// Defines a product in the simulator (both, with a production simulator) and the ledger's catalog.
    /// `simulatorOptions` go to the simulator only (group, level, familyShareable, introOffer); `group`
    /// and `prices` to the ledger.
    func defineProduct(
        _ productId: String, type: String, duration: String? = nil, group: String? = nil,
        prices: [String: String] = ["USD": "0.99"], simulatorOptions: [String: Any] = [:]
    ) async throws {
        var body: [String: Any] = ["type": type]
        if let duration { body["duration"] = duration }
        let simulatorBody = body.merging(simulatorOptions) { $1 }
        let simulated = try await simulator(.PUT, "/admin/apps/\(Self.app)/products/\(productId)", simulatorBody)
        guard simulated.status == 200 else { throw HarnessError(message: "simulator product: \(simulated.status) \(simulated.text)") }
        if productionSimulatorBase != nil {
            let production = try await productionSimulator(.PUT, "/admin/apps/\(Self.app)/products/\(productId)", simulatorBody)
            guard production.status == 200 else { throw HarnessError(message: "production simulator product: \(production.status) \(production.text)") }
        }
        if let group { body["group"] = group }
        body["prices"] = prices
        let defined = try await send(.PUT, "/v1/apps/\(Self.app)/products/\(productId)", key: allKey, json: body)
        guard defined.status == 200 else { throw HarnessError(message: "ledger product: \(defined.status) \(defined.text)") }
    }

    /// Buys in the simulator; returns the transaction id and the app receipt.
    /// `production: true` buys in the production simulator.
    func buy(_ user: String, _ productId: String, quantity: Int = 1, production: Bool = false) async throws -> (transactionId: String, receipt: String) {
        let admin = production ? productionSimulator : simulator
        _ = try await admin(.POST, "/admin/users", ["userId": user])
        let answer = try await admin(.POST, "/admin/purchases", ["userId": user, "bundleId": Self.app, "productId": productId, "quantity": quantity])
        guard answer.status == 201, let transaction = answer.json["transaction"] as? [String: Any],
              let id = transaction["transactionId"] as? String, let receipt = answer.json["receipt"] as? String
        else { throw HarnessError(message: "simulator purchase: \(answer.status) \(answer.text)") }
        return (id, receipt)
    }

    /// Posts a receipt to the ledger.
    func ingest(_ user: String, device: String, receipt: String, price: String? = nil, currency: String? = nil, key: String? = nil) async throws -> Answer {
        var body: [String: Any] = ["userId": user, "deviceId": device, "receiptData": receipt]
        if let price { body["price"] = price }
        if let currency { body["currency"] = currency }
        return try await send(.POST, "/v1/apps/\(Self.app)/receipts", key: key ?? allKey, json: body)
    }

    // MARK: Running one

    static let logger: Logger = {
        var logger = Logger(label: "ledger-http-tests")
        logger.logLevel = ProcessInfo.processInfo.environment["LEDGER_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .warning
        return logger
    }()

    /// `runProjections: false` serves without setting up or running the projections, like a ledger
    /// whose runner has not started yet on a new database. `readWait` is generous: the gap guard's
    /// horizon is the whole PostgreSQL server's, so a test elsewhere holding a transaction open on
    /// purpose delays every test's projections (never wrongly).
    /// The HTTP client the harnesses' webhook deliveries share (for the test process's life).
    static let webhookClient = HTTPWebhookSender.makeHTTPClient()

    /// Work a leading server runs beside the projections, as a service.
    struct Companion: Service {
        let work: @Sendable () async -> Void
        func run() async throws {
            try await cancelWhenGracefulShutdown { await work() }
        }
    }

    static func run<T: Sendable>(
        _ name: String = #function,
        appStoreRetry: RetryPolicy = .none,
        appStoreTimeout: Duration = .seconds(10),
        readWait: Duration = .seconds(30),
        runProjections: Bool = true,
        productionSimulator: Bool = false,
        server serverConfiguration: LedgerServer.Configuration = .init(host: "127.0.0.1", port: 0),
        entitlementCacheUsers: Int = EntitlementRowCache.defaultCapacity,
        authority given: SimulatorCertificateAuthority? = nil,
        notificationRetryDelays: [Duration] = [.milliseconds(200), .milliseconds(400), .milliseconds(800)],
        sessionSettings: [String: String] = [:],
        periodSigner: (any PeriodSigner)? = nil,
        followChanges: Bool = false,
        _ body: @Sendable (APIHarness) async throws -> T
    ) async throws -> T {
        LedgerMetrics.bootstrap()
        let authority = try given ?? SimulatorCertificateAuthority()
        return try await TestDatabase.withDatabase(name, sessionSettings: sessionSettings) { client, settings in
            // With two simulators both sign with one key, so each can open the other's receipts and
            // answer 21007/21008 as Apple's two environments do (else 21003).
            let signingKey: String? = productionSimulator ? "harness-\(UUID().uuidString)" : nil
            let simulatorPort = ServerPort()
            let simulator = try AppStoreSimulator(
                configuration: .init(host: "127.0.0.1", port: 0, environment: .sandbox, signingKey: signingKey, authority: authority,
                                     notificationRetryDelays: notificationRetryDelays), logger: logger
            ) { simulatorPort.report($0) }
            var services: [AppStoreSimulator] = [simulator]
            let productionPort = ServerPort()
            if productionSimulator {
                // Transaction ids start from the wall clock's millisecond: a later start keeps the two apart.
                try await Task.sleep(for: .milliseconds(5))
                services.append(try AppStoreSimulator(
                    configuration: .init(host: "127.0.0.1", port: 0, environment: .production, signingKey: signingKey, authority: authority),
                    logger: logger
                ) { productionPort.report($0) })
            }
            return try await withRunningServices(services, logger: logger) {
                let simulatorBase = "http://127.0.0.1:\(try await simulatorPort.value())"
                // PUT creates the app in the simulator with a random secret (a GET of an unknown app is a 404,
                // which left the ledger without the secret and auto-renewable receipts answering 21004).
                let secret = try await send(.PUT, simulatorBase + "/admin/apps/\(app)", key: nil).json["sharedSecret"] as? String
                guard let secret else { throw HarnessError(message: "the simulator did not create app \(app)") }
                var productionBase: String?
                if productionSimulator {
                    let base = "http://127.0.0.1:\(try await productionPort.value())"
                    let created = try await send(.PUT, base + "/admin/apps/\(app)", key: nil, json: ["sharedSecret": secret])
                    guard created.json["sharedSecret"] as? String == secret else {
                        throw HarnessError(message: "the production simulator did not take the shared secret: \(created.text)")
                    }
                    productionBase = base
                }
                let secrets = try SecretSealer(key: SecretSealer.generateKey(), origin: "the test harness's key")
                let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
                try await registry.addApp(app, sharedSecret: secret)
                var keys: [String: String] = [:]
                keys["all"] = try await registry.createKey(app: app, scopes: Set(APIScope.allCases)).token
                for scope in APIScope.allCases { keys[scope.rawValue] = try await registry.createKey(app: app, scopes: [scope]).token }

                let verifier = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
                    productionURL: (productionBase ?? simulatorBase) + "/production/verifyReceipt",
                    sandboxURL: simulatorBase + "/sandbox/verifyReceipt",
                    timeout: appStoreTimeout, retry: appStoreRetry
                ))
                var configuration = serverConfiguration
                configuration.api.readWaitTimeout = readWait
                // Tests read /health right after what they change: each probe reads the database.
                configuration.health.readingKept = .zero
                // As `ledger serve --trust-simulator-root` does: the simulator's signatures are accepted.
                configuration.api.signedPayloads = SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, authority.root])
                // As `ledger serve` does: keys and projection positions kept in memory, true to the announcements.
                let changes = ChangeFeed(configuration: try settings.connectionConfiguration,
                                         entitlements: entitlementCacheUsers > 0 ? EntitlementRowCache(capacity: entitlementCacheUsers) : nil,
                                         logger: logger)
                let server = LedgerServer(configuration: configuration, client: client, verifier: verifier, secrets: secrets,
                                          serverAPI: .init(productionURL: (productionBase ?? simulatorBase) + "/production",
                                                           sandboxURL: simulatorBase + "/sandbox"),
                                          changes: changes, periodSigner: periodSigner, logger: logger)
                // As `ledger serve` does: the projections' views exist before the first request.
                let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger)
                if runProjections { try await runner.prepare() }
                let ledgerPort = ServerPort()
                // As the leading `ledger serve` does: the change feed written beside the projections.
                let writer = ChangeWriter(client: client, listenConfiguration: try settings.connectionConfiguration, logger: logger)
                // And the webhooks sent. Only for the tests that follow changes: the others would pay
                // for both with every append.
                let webhooks = WebhookDelivery(store: PostgresWebhooks(client: client, secrets: secrets, logger: logger),
                                               sender: HTTPWebhookSender(client: Self.webhookClient), logger: logger)
                let delivering = Companion { await webhooks.run() }
                let following: [any Service] = followChanges ? [writer, delivering] : []
                let application = server.application(services: runProjections ? [changes, runner] + following : [changes]) { ledgerPort.report($0) }
                return try await withRunningServices([application], logger: logger) {
                    let harness = APIHarness(
                        base: "http://127.0.0.1:\(try await ledgerPort.value())", simulatorBase: simulatorBase,
                        productionSimulatorBase: productionBase, client: client, settings: settings, keys: keys, secrets: secrets,
                        changes: changes, authority: authority, readWait: readWait
                    )
                    return try await body(harness)
                }
            }
        }
    }
}
