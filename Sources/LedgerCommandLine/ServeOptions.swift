import AppStore
import ArgumentParser
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerRuntime
import LedgerStore
import LocalPostgres
import Logging
import NIOCore

/// What `serve` is told: the database, where to listen, the App Store, the limits at the edge.
/// Shared by `ledger serve` and the fault tests' `ledger-bench serve`.
public struct ServeOptions: ParsableArguments, Sendable {
    public init() {}

    @Flag(inversion: .prefixedNo, help: "Migrate as the owner before serving, when the owner's URL is known.")
    public var migrate = true

    @OptionGroup public var options: GlobalOptions

    @Option(help: "Address to listen on (default: $LEDGER_HOST or 127.0.0.1).")
    public var host: String?

    @Option(help: "Port to listen on (default: $LEDGER_PORT or 8080).")
    public var port: Int?

    @Option(help: "App Store production verifyReceipt URL (default: $LEDGER_APPSTORE_PRODUCTION_URL or Apple's).")
    public var appstoreProductionURL: String?

    @Option(help: "App Store sandbox verifyReceipt URL (default: $LEDGER_APPSTORE_SANDBOX_URL or Apple's).")
    public var appstoreSandboxURL: String?

    @Option(help: "Longest a read with minPosition waits for the projections, in milliseconds (default: $LEDGER_READ_WAIT_MS or 5000).")
    public var readWaitMs: Int?

    @Option(help: "Close a connection that sends nothing for this long, in milliseconds (default: $LEDGER_IDLE_TIMEOUT_MS or 30000).")
    public var idleTimeoutMs: Int?

    @Option(help: "Longest a request body may take to arrive, in milliseconds; then 408 (default: $LEDGER_BODY_READ_TIMEOUT_MS or 30000).")
    public var bodyReadTimeoutMs: Int?

    @Option(help: "API requests answered at once; more get 503 with Retry-After (default: $LEDGER_MAX_REQUESTS_IN_FLIGHT or 256).")
    public var maxRequestsInFlight: Int?

    @Option(help: "Notifications (the keyless webhook) answered at once, apart from the API's budget; more get 503 (default: $LEDGER_MAX_WEBHOOKS_IN_FLIGHT or 32).")
    public var maxWebhooksInFlight: Int?

    @Option(help: "Longest a notification's body may take to arrive, in milliseconds; then 408 (default: $LEDGER_WEBHOOK_BODY_READ_TIMEOUT_MS or 5000).")
    public var webhookBodyReadTimeoutMs: Int?

    @Option(help: ArgumentHelp(
        "A file holding the token a scraper sends (Authorization: Bearer …) for /metrics on the API's listener (default: $LEDGER_METRICS_TOKEN; none: /metrics answers 403 there).",
        discussion: "Or serve the metrics on a listener of their own with --metrics-port."
    ))
    public var metricsTokenFile: String?

    @Option(help: "Serve /metrics, open, on a listener of its own on this port (default: $LEDGER_METRICS_PORT; none).")
    public var metricsPort: Int?

    @Option(help: "Address of the metrics listener (default: $LEDGER_METRICS_HOST or 127.0.0.1).")
    public var metricsHost: String?

    @Option(help: ArgumentHelp(
        "Users whose entitlement rows this server keeps in memory between reads, 0 for none (default: $LEDGER_ENTITLEMENT_CACHE_USERS or 200000).",
        discussion: "A kept user is forgotten as soon as an event of theirs, or of the app's catalog, reaches the projections."
    ))
    public var entitlementCacheUsers: Int?

    @Option(help: ArgumentHelp(
        "Also trust this PEM root for StoreKit 2 transactions and App Store notifications (default: $LEDGER_TRUST_SIMULATOR_ROOT; none).",
        discussion: "For the simulator's test root (ledger appstore-sim --root-out FILE). Apple's root is always trusted; never set this in production."
    ))
    public var trustSimulatorRoot: String?

    /// The roles, the runtime's configuration and the secrets key these options and the
    /// environment give; a value out of range is refused, naming the flag and the variable.
    public func resolve(logger: Logger) async throws -> (roles: DatabaseRoles, configuration: LedgerRuntime.Configuration, secrets: SecretSealer?) {
        let environment = ProcessInfo.processInfo.environment
        let host = host ?? environment["LEDGER_HOST"] ?? "127.0.0.1"
        func number(_ flag: Int?, _ option: String, _ variable: String, default value: Int, _ range: ClosedRange<Int>, _ what: String) throws -> Int {
            let text = flag.map(String.init) ?? environment[variable] ?? String(value)
            guard let number = Int(text), range.contains(number) else {
                throw CommandFailure(message: "\(what) '\(text)' (from \(option) or \(variable)) is not a number from \(range.lowerBound) to \(range.upperBound)")
            }
            return number
        }
        let port = try number(self.port, "--port", "LEDGER_PORT", default: 8080, 0...65535, "port")
        let wait = try number(readWaitMs, "--read-wait-ms", "LEDGER_READ_WAIT_MS", default: 5000, 0...60_000, "read wait in milliseconds")
        let idle = try number(idleTimeoutMs, "--idle-timeout-ms", "LEDGER_IDLE_TIMEOUT_MS", default: 30_000, 100...3_600_000,
                              "idle timeout in milliseconds")
        let bodyRead = try number(bodyReadTimeoutMs, "--body-read-timeout-ms", "LEDGER_BODY_READ_TIMEOUT_MS", default: 30_000,
                                  100...3_600_000, "body read timeout in milliseconds")
        let inFlight = try number(maxRequestsInFlight, "--max-requests-in-flight", "LEDGER_MAX_REQUESTS_IN_FLIGHT", default: 256,
                                  1...100_000, "requests in flight")
        let webhooks = try number(maxWebhooksInFlight, "--max-webhooks-in-flight", "LEDGER_MAX_WEBHOOKS_IN_FLIGHT", default: 32,
                                  1...10_000, "notifications in flight")
        let webhookBodyRead = try number(webhookBodyReadTimeoutMs, "--webhook-body-read-timeout-ms", "LEDGER_WEBHOOK_BODY_READ_TIMEOUT_MS",
                                         default: 5_000, 100...600_000, "notification body read timeout in milliseconds")
        var metricsToken = environment["LEDGER_METRICS_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if let metricsTokenFile {
            guard let text = try? String(contentsOfFile: metricsTokenFile, encoding: .utf8) else {
                throw CommandFailure(message: "--metrics-token-file '\(metricsTokenFile)' cannot be read")
            }
            metricsToken = text.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        if let token = metricsToken, token.utf8.count < 16 {
            throw CommandFailure(message: "the metrics token (--metrics-token-file or LEDGER_METRICS_TOKEN) has \(token.utf8.count) characters; use 16 or more, e.g. `openssl rand -hex 24`")
        }
        let metricsListener: (host: String, port: Int)?
        if metricsPort != nil || environment["LEDGER_METRICS_PORT"] != nil {
            let port = try number(metricsPort, "--metrics-port", "LEDGER_METRICS_PORT", default: 9090, 0...65535, "metrics port")
            metricsListener = (metricsHost ?? environment["LEDGER_METRICS_HOST"] ?? "127.0.0.1", port)
        } else {
            metricsListener = nil
        }
        let cacheUsers = try number(entitlementCacheUsers, "--entitlement-cache-users", "LEDGER_ENTITLEMENT_CACHE_USERS",
                                    default: EntitlementRowCache.defaultCapacity, 0...100_000_000, "entitlement cache size in users")
        var appStore = AppStoreConfiguration.fromEnvironment(environment)
        if let appstoreProductionURL { appStore.productionURL = appstoreProductionURL }
        if let appstoreSandboxURL { appStore.sandboxURL = appstoreSandboxURL }
        for url in [appStore.productionURL, appStore.sandboxURL] where URL(string: url)?.host == nil {
            throw CommandFailure(message: "App Store URL '\(URLRedaction.masked(url))' is not an http(s) URL")
        }
        let defaults = LedgerHealth.Thresholds()
        let health = LedgerHealth.Thresholds(
            stall: try Self.seconds("LEDGER_HEALTH_STALL_SECONDS", in: environment) ?? defaults.stall,
            longTransaction: try Self.seconds("LEDGER_HEALTH_TRANSACTION_SECONDS", in: environment) ?? defaults.longTransaction,
            syncStale: try Self.seconds("LEDGER_HEALTH_SYNC_SECONDS", in: environment) ?? defaults.syncStale,
            readingKept: try Self.readingKept(in: environment) ?? defaults.readingKept
        )
        let signedPayloads = try Self.signedPayloadVerifier(trustSimulatorRoot ?? environment["LEDGER_TRUST_SIMULATOR_ROOT"], logger: logger)
        let secrets = try options.secretSealer()
        var roles = try await options.databaseRoles(logger: logger)
        if !migrate { roles.owner = nil }
        let server = LedgerServer.Configuration(
            host: host, port: port,
            api: .init(readWaitTimeout: .milliseconds(wait), bodyReadTimeout: .milliseconds(bodyRead),
                       webhookBodyReadTimeout: .milliseconds(webhookBodyRead), signedPayloads: signedPayloads),
            idleTimeout: .milliseconds(idle), maximumRequestsInFlight: inFlight, maximumWebhooksInFlight: webhooks, health: health,
            metricsToken: metricsToken
        )
        let configuration = LedgerRuntime.Configuration(server: server, appStore: appStore, serverAPI: .fromEnvironment(environment),
                                                        entitlementCacheUsers: cacheUsers, metricsListener: metricsListener)
        return (roles, configuration, secrets)
    }

    /// Apple's root, and a test root only when told (with a warning: it must never reach production).
    public static func signedPayloadVerifier(_ testRoot: String?, logger: Logger) throws -> SignedPayloadVerifier {
        do {
            let verifier = try SignedPayloadVerifier.trusting(testRootPEM: testRoot.flatMap { $0.isEmpty ? nil : $0 })
            if testRoot?.isEmpty == false {
                logger.warning("trusting a test root for signed payloads besides Apple's: StoreKit 2 transactions and notifications it signs are recorded; never in production",
                               metadata: ["ledger.signed_payload_roots": "\(verifier.trustedRootSubjects.joined(separator: "; "))"])
            }
            return verifier
        } catch let error as TestRootError {
            throw CommandFailure(message: "--trust-simulator-root (or LEDGER_TRUST_SIMULATOR_ROOT): \(error.message)")
        }
    }

    /// The socket's refusal to listen in words, with what to do; any other error as it is.
    public static func listening(_ error: any Error, on configuration: LedgerServer.Configuration) -> any Error {
        guard let error = error as? IOError else { return error }
        let address = "\(configuration.host):\(configuration.port)"
        switch error.errnoCode {
        case EADDRINUSE:
            return CommandFailure(message: "cannot listen on \(address): another program listens there (another `ledger serve`?); stop it, or choose another port with --port")
        case EADDRNOTAVAIL:
            return CommandFailure(message: "cannot listen on \(address): no network interface of this machine has that address; check --host")
        case EACCES:
            return CommandFailure(message: "cannot listen on \(address): not permitted (ports below 1024 need privileges); choose another port with --port")
        default:
            return error
        }
    }

    /// A whole number of seconds from an environment variable, nil when it is not set.
    /// `LEDGER_HEALTH_READING_SECONDS`: how long one reading of the database answers `/health`
    /// probes, 0 (every probe reads) to 60.
    static func readingKept(in environment: [String: String]) throws -> Duration? {
        let name = "LEDGER_HEALTH_READING_SECONDS"
        guard let text = environment[name] else { return nil }
        guard let seconds = Int(text), (0...60).contains(seconds) else {
            throw CommandFailure(message: "\(name) '\(text)' is not a whole number of seconds from 0 to 60")
        }
        return .seconds(seconds)
    }

    static func seconds(_ name: String, in environment: [String: String]) throws -> Duration? {
        guard let text = environment[name] else { return nil }
        guard let seconds = Int(text), (1...86_400).contains(seconds) else {
            throw CommandFailure(message: "\(name) '\(text)' is not a whole number of seconds from 1 to 86400")
        }
        return .seconds(seconds)
    }
}
