import AppStore
import AppStoreSimulator
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerDemo
import LedgerDomain
import LedgerRuntime
import LedgerStore
import LedgerTesting
import Logging
import NIOHTTP1
import PostgresNIO
import ServiceLifecycle

/// Prepares receipts in the simulator, then times receipt ingestion and entitlement reads on the
/// ledger; returning shuts the benchmark's services down.
struct HTTPLoadService: Service {
    static let bundleId = "com.example.bench"
    static let product = "coins"

    let settings: DatabaseSettings  // the server's role
    let secrets: SecretSealer
    let load: HTTPLoad
    let simulatorPort: ServerPort
    let ledgerPort: ServerPort
    let receipts: Int
    let reads: Int
    let workers: Int
    /// Where the CPU of each timed phase went, when measured.
    let cpu: CPUMeter?
    /// Signs the notifications of the notifications phase, as the simulator signs its own.
    let signer: SimulatorSignedPayloads
    let logger: Logger
    let results = LoadResults()

    /// Waits until the projections and the change feed have followed the log to its head (a
    /// history written before the run), so that their catching up is not timed with the requests.
    func followersCaughtUp() async throws {
        let started = ContinuousClock.now
        try await LedgerDatabase.withClient(settings, maximumConnections: 1, logger: logger) { client in
            while true {
                let rows = try await client.query("""
                    SELECT (SELECT coalesce(max("position"), 0) FROM ledger.events)
                         - least((SELECT coalesce(min("position"), 0) FROM ledger.projections WHERE status = 'live'),
                                 (SELECT coalesce(max("position"), 0) FROM ledger.change_writer))
                    """, logger: logger)
                var behind: Int64 = 0
                for try await lag in rows.decode(Int64.self) { behind = lag }
                if behind <= 0 { return }
                guard started.duration(to: .now) < .seconds(300) else {
                    throw CommandFailure(message: "the projections or the change feed are still \(behind) events behind the log after 5 minutes; nothing was timed")
                }
                try await Task.sleep(for: .milliseconds(200))
            }
        }
    }

    func run() async throws {
        let simulator = "http://127.0.0.1:\(try await simulatorPort.value("the App Store simulator"))"
        let ledger = "http://127.0.0.1:\(try await ledgerPort.value("the ledger's server"))"
        let app = Self.bundleId, product = Self.product
        let secret = UUID().uuidString.replacingOccurrences(of: "-", with: "").lowercased()
        try await DemoClient.createSimulatorApp(simulatorBase: simulator, bundleId: app, sharedSecret: secret, http: load.http)
        let key = try await LedgerDatabase.withClient(settings, maximumConnections: 2, logger: logger) { client in
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            _ = try await registry.addApp(app, sharedSecret: secret)
            return try await registry.createKey(app: app, scopes: Set(APIScope.allCases), name: "ledger-bench http").token
        }
        try await expect(200, try HTTPLoad.request(.PUT, "\(simulator)/admin/apps/\(app)/products/\(product)", json: ["type": "consumable"]))
        try await expect(200, try HTTPLoad.request(.PUT, "\(ledger)/v1/apps/\(app)/products/\(product)", key: key,
                                                   json: ["type": "consumable", "prices": ["USD": "0.99"]]))

        // Receipts for warm-up, the timed run and one last write whose position the reads wait for.
        let warmUp = min(64, receipts)
        let total = warmUp + receipts + 1
        Output.error("bench http: buying \(total) receipts in the simulator (not timed)")
        let bought = try await withThrowingTaskGroup(of: [(Int, String, String)].self) { group in
            for worker in 0..<workers {
                group.addTask {
                    var mine: [(Int, String, String)] = []
                    for index in stride(from: worker, to: total, by: workers) {
                        let user = "user-\(index)"
                        try await expect(201, try HTTPLoad.request(.POST, "\(simulator)/admin/users", json: ["userId": user]))
                        let answer = try await load.json(try HTTPLoad.request(.POST, "\(simulator)/admin/purchases", json: [
                            "userId": user, "bundleId": app, "productId": product, "quantity": 1,
                        ]))
                        guard answer.status == 201, let receipt = answer.body["receipt"] as? String,
                              let id = (answer.body["transaction"] as? [String: Any])?["transactionId"] as? String
                        else {
                            throw CommandFailure(message: "the simulator refused a purchase: \(answer.status) \(answer.body)")
                        }
                        mine.append((index, receipt, id))
                    }
                    return mine
                }
            }
            var all: [(Int, String, String)] = []
            for try await part in group { all += part }
            return all.sorted { $0.0 < $1.0 }
        }
        let ingests = try bought.map { index, receipt, _ in
            try HTTPLoad.request(.POST, "\(ledger)/v1/apps/\(app)/receipts", key: key, json: [
                "userId": "user-\(index)", "deviceId": "device-\(index)", "receiptData": receipt, "price": "0.99", "currency": "USD",
            ])
        }

        _ = try await load.run(Array(ingests[..<warmUp]), workers: workers, expect: 200)
        try await followersCaughtUp()
        Output.error("bench http: ingesting \(receipts) receipts")
        let ingest = try await metered { try await load.run(Array(ingests[warmUp..<(warmUp + receipts)]), workers: workers, expect: 200) }

        let last = try await load.json(ingests[total - 1])
        guard last.status == 200, let position = last.body["position"] as? Int else {
            throw CommandFailure(message: "the last receipt was refused: \(last.status) \(last.body)")
        }
        let caughtUp = try HTTPLoad.request(.GET, "\(ledger)/v1/apps/\(app)/users/user-\(total - 1)/entitlements?minPosition=\(position)", key: key)
        try await expect(200, caughtUp)

        let users = warmUp + receipts
        let gets = try (0..<reads).map { index in
            try HTTPLoad.request(.GET, "\(ledger)/v1/apps/\(app)/users/user-\((index * 7_919) % users)/entitlements", key: key)
        }
        _ = try await load.run(Array(gets.prefix(min(reads, 256))), workers: workers, expect: 200)
        Output.error("bench http: reading entitlements \(reads) times")
        let read = try await metered { try await load.run(gets, workers: workers, expect: 200) }

        // Apple refunds every timed user's purchase, and says so in a signed notification: each
        // records the notification and the transaction's changed fields (one append of two events).
        Output.error("bench http: signing \(receipts) REFUND notifications (not timed)")
        let now = Date()
        let notifications = try bought[warmUp..<(warmUp + receipts)].map { _, _, transactionId in
            let transaction = try signer.sign(SimulatorSignedPayloads.transaction(
                transactionId: transactionId, bundleId: app, productId: product, type: .consumable, purchaseDate: now.addingTimeInterval(-60),
                price: 990, currency: "USD", environment: .sandbox, revocationDate: now, revocationReason: 0, signedDate: now
            ))
            let payload = try signer.sign(SimulatorSignedPayloads.notification(
                type: "REFUND", bundleId: app, environment: .sandbox, signedTransactionInfo: transaction, signedDate: now
            ))
            return try HTTPLoad.request(.POST, "\(ledger)/v1/apps/\(app)/notifications", json: ["signedPayload": payload])
        }
        Output.error("bench http: posting \(receipts) notifications")
        let notified = try await metered { try await load.run(notifications, workers: workers, expect: 200) }
        await results.set(ingest: ingest, read: read, notifications: notified)
    }

    /// A timed phase, with the CPU each process used meanwhile when a meter is given.
    private func metered(_ phase: () async throws -> HTTPLoad.Measurement) async throws -> HTTPLoad.Measurement {
        guard let cpu else { return try await phase() }
        var (measurement, use) = try await cpu.measure(phase)
        measurement.cpu = use
        return measurement
    }

    private func expect(_ status: Int, _ request: HTTPLoad.Request) async throws {
        let answer = try await load.json(request)
        guard answer.status == status else {
            throw CommandFailure(message: "\(request.method.rawValue) \(request.url) answered \(answer.status), expected \(status): \(answer.body)")
        }
    }
}
