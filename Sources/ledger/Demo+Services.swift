import AppStore
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerDemo
import LedgerHTTP
import LedgerRuntime
import LedgerStore
import LocalPostgres
import Logging
import ServiceLifecycle

/// Registers the demo's app, tells the stories, prints where to look next; returning shuts the demo down.
struct DemoStoriesService: Service {
    let roles: DatabaseRoles
    let secrets: SecretSealer
    let bundleId: String
    let sharedSecret: String
    let simulatorPort: ServerPort
    let ledgerPort: ServerPort
    let appServer: DemoAppServer
    let appServerPort: ServerPort
    let keepRunning: Bool
    let logger: Logger

    func run() async throws {
        let simulatorBase = "http://127.0.0.1:\(try await simulatorPort.value("the App Store simulator"))"
        let ledgerBase = "http://127.0.0.1:\(try await ledgerPort.value("the ledger's server"))"
        try await DemoClient.createSimulatorApp(simulatorBase: simulatorBase, bundleId: bundleId, sharedSecret: sharedSecret)
        let key = try await LedgerDatabase.withClient(roles.runtime, maximumConnections: 2, logger: logger) { client in
            let registry = AppRegistry(client: client, logger: logger, secrets: secrets)
            _ = try await registry.addApp(bundleId, sharedSecret: sharedSecret)
            return try await registry.createKey(app: bundleId, scopes: Set(APIScope.allCases), name: "ledger demo").token
        }
        Output.line("Purchase Ledger demo")
        Output.line("  ledger         \(ledgerBase)  (database \(roles.runtime.database))")
        Output.line("  App Store      \(simulatorBase)  (simulator, sandbox)")
        Output.line("  app            \(bundleId), registered with the simulator's shared secret")
        Output.line("  API key        \(key)  (scopes ingest, read, finance, admin)")
        let appServerBase = "http://127.0.0.1:\(try await appServerPort.value("the app's server"))"
        Output.line("  app's server   \(appServerBase)  (takes the ledger's webhooks)")

        let started = ContinuousClock.now
        let client = DemoClient(ledgerBase: ledgerBase, apiKey: key, simulatorBase: simulatorBase, bundleId: bundleId)
        let results = try await DemoStories(client: client, appServer: appServer, appServerBase: appServerBase) { Output.line($0) }.runAll()
        if let restored = results.first(where: { $0.story == "restored-subscription" }) {
            let verifier = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
                productionURL: simulatorBase + "/production/verifyReceipt", sandboxURL: simulatorBase + "/sandbox/verifyReceipt"
            ))
            _ = try await ReplayStory(server: roles, verifier: verifier, sharedSecret: sharedSecret, bundleId: bundleId, logger: logger) {
                Output.line($0)
            }.run(replaying: restored)
        }
        let elapsed = started.duration(to: .now)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18

        Output.line("")
        Output.line("== Where everyone is now ==")
        for result in results {
            Output.line("  \(result.userId) (\(result.story)):")
            for line in DemoStories.summary(of: result) { Output.line("    " + line) }
        }
        Output.line("")
        Output.line("\(results.count) stories, \(results.reduce(0) { $0 + $1.steps.count }) requests in " + String(format: "%.1f s", seconds))
        Output.line("")
        Output.line("== Where to look next ==")
        let base = keepRunning ? ledgerBase : "http://127.0.0.1:8080"
        if !keepRunning {
            Output.line("  ledger serve                  # in another terminal: the same database, the key still works")
        }
        Output.line("  curl -s -H 'Authorization: Bearer \(key)' -H 'Accept: text/csv' '\(base)/v1/audit/events?environment=sandbox'")
        Output.line("  curl -s -H 'Authorization: Bearer \(key)' \(base)/v1/apps/\(bundleId)/users/bob/history")
        Output.line("  curl -s -H 'Authorization: Bearer \(key)' '\(base)/v1/apps/\(bundleId)/changes?after=0&limit=20'")
        Output.line("  ledger webhooks deliveries --app \(bundleId)")
        Output.line("  \(base)/finance            # in a browser: sign in with the key above, then choose Sandbox")
        Output.line("  ledger projections status")
        Output.line("  ledger audit export --app \(bundleId) --environment sandbox")
        Output.line("  ledger audit summary --app \(bundleId) --environment sandbox")
        if keepRunning {
            Output.line("")
            Output.line("The ledger and the simulator keep running; Ctrl-C stops them.")
            try? await gracefulShutdown()
        }
    }
}
