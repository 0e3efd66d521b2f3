@testable import AppStore
@testable import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import LedgerDomain
import LedgerRuntime
import LedgerTesting
import Logging
import NIOHTTP1

/// A running simulator on an ephemeral loopback port, with helpers for its admin API.
struct SimulatorHarness: Sendable {
    let base: String
    let simulator: AppStoreSimulator

    var verifyURL: String { base + "/verifyReceipt" }

    /// A client that sends production-first to this simulator (and, for the other URL, `sandboxURL`).
    func verifier(sandboxURL: String? = nil, productionURL: String? = nil, retry: RetryPolicy = .none, timeout: Duration = .seconds(10)) -> AppStoreReceiptVerifier {
        AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
            productionURL: productionURL ?? verifyURL,
            sandboxURL: sandboxURL ?? verifyURL,
            timeout: timeout,
            retry: retry
        ))
    }

    @discardableResult
    func admin(_ method: HTTPMethod, _ path: String, _ body: [String: Any]? = nil) async throws -> LenientJSONBox {
        let (status, json) = try await sendJSON(method, base + path, body)
        return LenientJSONBox(status: status, json: LenientJSON(json))
    }

    /// Defines a product; `options` adds keys such as `group`, `level`, `familyShareable`, `introOffer`.
    func defineProduct(_ bundleId: String, _ productId: String, type: String, duration: String? = nil, options: [String: Any] = [:]) async throws {
        var body: [String: Any] = options
        body["type"] = type
        if let duration { body["duration"] = duration }
        let answer = try await admin(.PUT, "/admin/apps/\(bundleId)/products/\(productId)", body)
        precondition(answer.status == 200, "defining \(productId) answered \(answer.status)")
    }

    func sharedSecret(_ bundleId: String) async throws -> SharedSecret {
        SharedSecret(try await admin(.GET, "/admin/apps/\(bundleId)").json["sharedSecret"].string ?? "")
    }

    func createUser(_ userId: String) async throws {
        try await admin(.POST, "/admin/users", ["userId": userId])
    }

    /// Buys and returns (transaction id, app receipt, transaction receipt).
    func purchase(_ userId: String, _ bundleId: String, _ productId: String, quantity: Int = 1) async throws -> (id: String, receipt: String, transactionReceipt: String) {
        let answer = try await admin(.POST, "/admin/purchases", ["userId": userId, "bundleId": bundleId, "productId": productId, "quantity": quantity])
        guard answer.status == 201,
              let id = answer.json["transaction"]["transactionId"].string,
              let receipt = answer.json["receipt"].string,
              let transactionReceipt = answer.json["transactionReceipt"].string
        else { throw HarnessError(message: "purchase answered \(answer.status): \(String(describing: answer.json.raw))") }
        return (id, receipt, transactionReceipt)
    }

    func advance(minutes: Double) async throws {
        try await admin(.POST, "/admin/clock/advance", ["minutes": minutes])
    }

    /// The simulator's clock, in epoch milliseconds.
    func nowMs() async throws -> Int64 {
        try await admin(.GET, "/admin/clock").json["nowMs"].int64 ?? 0
    }

    /// A fresh app receipt of the user, as the device would have after a refresh.
    func freshReceipt(_ userId: String, _ bundleId: String) async throws -> String {
        let answer = try await admin(.GET, "/admin/users/\(userId)/apps/\(bundleId)")
        guard let receipt = answer.json["receipt"].string else {
            throw HarnessError(message: "no receipt for \(userId): \(answer.status)")
        }
        return receipt
    }

    /// The raw `verifyReceipt` answer to `receipt`, with the app's shared secret; fails unless status 0.
    func verifyJSON(_ receipt: String, _ bundleId: String, excludeOldTransactions: Bool = false) async throws -> LenientJSON {
        let body: [String: Any] = [
            "receipt-data": receipt,
            "password": try await sharedSecret(bundleId).value,
            "exclude-old-transactions": excludeOldTransactions,
        ]
        let (_, json) = try await sendJSON(.POST, verifyURL, body)
        let answer = LenientJSON(json)
        guard answer["status"].int == 0 else {
            throw HarnessError(message: "verifyReceipt answered \(String(describing: json))")
        }
        return answer
    }
}

/// An admin answer: HTTP status and the JSON body.
struct LenientJSONBox {
    let status: Int
    let json: LenientJSON
}


/// Runs a simulator for the duration of `body`.
func withSimulator<T: Sendable>(
    environment: StoreEnvironment = .sandbox,
    signingKey: String? = nil,
    _ body: (SimulatorHarness) async throws -> T
) async throws -> T {
    let reporter = ServerPort()
    let simulator = try AppStoreSimulator(
        configuration: .init(host: "127.0.0.1", port: 0, environment: environment, signingKey: signingKey),
        logger: quietLogger
    ) { port in reporter.report(port) }
    return try await withRunningServices([simulator], logger: quietLogger, onExit: reporter.stopped) {
        let port = try await reporter.value()
        return try await body(SimulatorHarness(base: "http://127.0.0.1:\(port)", simulator: simulator))
    }
}
