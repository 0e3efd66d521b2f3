import AppStoreSimulator
import Crypto
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerRuntime
import LedgerStore
import LedgerTesting
import Logging
import NIOHTTP1

/// What the tests that run `ledger serve` as a child process start from: the App Store simulator
/// with the test app and its consumable, and the app registered in the ledger's database with its
/// shared secret sealed under a key of its own (handed to the server as LEDGER_SECRET_KEY, as in
/// production), and a key of every scope.
struct ServedApp: Sendable {
    let simulatorBase: String
    let key: String
    /// LEDGER_SECRET_KEY for the server.
    let secretKey: String

    var app: String { APIHarness.app }
    var verifyReceiptURL: String { simulatorBase + "/verifyReceipt" }

    /// Runs `body` while the simulator runs, the app registered through `client`.
    static func with<Result: Sendable>(
        _ client: DatabasePool, logger: Logger, _ body: @Sendable (ServedApp) async throws -> Result
    ) async throws -> Result {
        let simulatorPort = ServerPort()
        let simulator = try AppStoreSimulator(configuration: .init(host: "127.0.0.1", port: 0, environment: .sandbox), logger: logger) {
            simulatorPort.report($0)
        }
        return try await withRunningServices([simulator], logger: logger) {
            let simulatorBase = "http://127.0.0.1:\(try await simulatorPort.value())"
            let app = APIHarness.app
            let secret = try await APIHarness.send(.PUT, simulatorBase + "/admin/apps/\(app)", key: nil, json: [String: Any]())
                .json["sharedSecret"] as? String
            _ = try await APIHarness.send(.PUT, simulatorBase + "/admin/apps/\(app)/products/coins.100", key: nil, json: ["type": "consumable"])
            let secretKey = SecretSealer.generateKey().withUnsafeBytes { Data($0) }.base64EncodedString()
            guard let secrets = try SecretSealer.fromEnvironment(["LEDGER_SECRET_KEY": secretKey]) else {
                throw HarnessError(message: "LEDGER_SECRET_KEY was not taken")
            }
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            try await registry.addApp(app, sharedSecret: secret)
            let key = try await registry.createKey(app: app, scopes: [.ingest, .admin, .read]).token
            return try await body(ServedApp(simulatorBase: simulatorBase, key: key, secretKey: secretKey))
        }
    }

    /// `user` buys `quantity` coins in the simulator: the transaction and the receipt that holds it.
    func buy(_ user: String, quantity: Int) async throws -> (transactionId: String, receipt: String) {
        _ = try await APIHarness.send(.POST, simulatorBase + "/admin/users", key: nil, json: ["userId": user])
        let bought = try await APIHarness.send(.POST, simulatorBase + "/admin/purchases", key: nil,
                                               json: ["userId": user, "bundleId": app, "productId": "coins.100", "quantity": quantity])
        guard let transaction = bought.json["transaction"] as? [String: Any],
              let transactionId = transaction["transactionId"] as? String,
              let receipt = bought.json["receipt"] as? String
        else { throw HarnessError(message: "the simulator did not sell \(user) coins: \(bought.text)") }
        return (transactionId, receipt)
    }

    /// `ledger serve` against `database`, verifying with this simulator; the catalog knows the coins.
    func startServer(database: DatabaseSettings, log: URL, killAt faultPoint: String? = nil) async throws -> ServerCrashTests.Server {
        let server = try await ServerCrashTests.Server.start(database: database, appStore: verifyReceiptURL, secretKey: secretKey, log: log,
                                                             killAt: faultPoint)
        let defined = try await APIHarness.send(.PUT, server.base + "/v1/apps/\(app)/products/coins.100", key: key, json: ["type": "consumable"])
        guard (200..<300).contains(defined.status) else {
            server.kill()
            throw HarnessError(message: "the catalog refused the coins: \(defined.text)")
        }
        return server
    }
}
