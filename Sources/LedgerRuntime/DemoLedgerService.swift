import AppStore
import LedgerHTTP
import LedgerStore
import Logging
import ServiceLifecycle

/// The ledger as `ledger serve` runs it, with the simulator as its App Store, on a free port.
public struct DemoLedgerService: Service {
    let roles: DatabaseRoles
    let secrets: SecretSealer
    let simulatorPort: ServerPort
    let ledgerPort: ServerPort
    /// Apple's root and the simulator's: the demo's StoreKit 2 story is signed by the simulator.
    let signedPayloads: SignedPayloadVerifier
    let logger: Logger

    public init(
        roles: DatabaseRoles, secrets: SecretSealer, simulatorPort: ServerPort, ledgerPort: ServerPort, signedPayloads: SignedPayloadVerifier,
        logger: Logger
    ) {
        self.roles = roles
        self.secrets = secrets
        self.simulatorPort = simulatorPort
        self.ledgerPort = ledgerPort
        self.signedPayloads = signedPayloads
        self.logger = logger
    }

    public func run() async throws {
        let simulator = "http://127.0.0.1:\(try await simulatorPort.value("the App Store simulator"))"
        let configuration = LedgerRuntime.Configuration(
            server: .init(host: "127.0.0.1", port: 0, api: .init(signedPayloads: signedPayloads)),
            appStore: AppStoreConfiguration(productionURL: simulator + "/production/verifyReceipt", sandboxURL: simulator + "/sandbox/verifyReceipt")
        )
        // The demo's group handles the signals; this nested group shuts down when it does.
        try await LedgerRuntime.serve(roles: roles, configuration: configuration, secrets: secrets, logger: logger, gracefulShutdownSignals: []) { port in
            ledgerPort.report(port)
        }
    }
}
