import Foundation
import LedgerDomain

/// Where and how the ledger talks to `verifyReceipt`; built once at the edge from flags and environment.
///
/// Shared secrets are not here: they belong to each app and travel with each request.
public struct AppStoreConfiguration: Sendable {
    /// Apple's production endpoint; receipts are always sent here first.
    public static let appleProductionURL = "https://buy.itunes.apple.com/verifyReceipt"
    /// Apple's sandbox endpoint; used when production answers 21007.
    public static let appleSandboxURL = "https://sandbox.itunes.apple.com/verifyReceipt"

    public var productionURL: String
    public var sandboxURL: String
    /// The time one HTTP exchange may take, from connecting to the last byte of the answer's body;
    /// past it the attempt counts as unavailable (a timeout).
    public var timeout: Duration
    /// How 21005, retryable 21100–21199, timeouts and connection errors are retried.
    public var retry: RetryPolicy
    /// The largest answer accepted; long-lived app receipts with years of renewals run to hundreds of kilobytes.
    public var maximumResponseBytes: Int

    public init(
        productionURL: String = Self.appleProductionURL,
        sandboxURL: String = Self.appleSandboxURL,
        timeout: Duration = .seconds(15),
        retry: RetryPolicy = RetryPolicy(),
        maximumResponseBytes: Int = 16 * 1024 * 1024
    ) {
        self.productionURL = productionURL
        self.sandboxURL = sandboxURL
        self.timeout = timeout
        self.retry = retry
        self.maximumResponseBytes = maximumResponseBytes
    }

    /// Apple's URLs unless `LEDGER_APPSTORE_PRODUCTION_URL` / `LEDGER_APPSTORE_SANDBOX_URL` say otherwise
    /// (point both at `ledger appstore-sim` to run without Apple).
    public static func fromEnvironment(_ variables: [String: String] = ProcessInfo.processInfo.environment) -> Self {
        func value(_ name: String) -> String? {
            variables[name].flatMap { $0.trimmingCharacters(in: .whitespaces).isEmpty ? nil : $0 }
        }
        return AppStoreConfiguration(
            productionURL: value("LEDGER_APPSTORE_PRODUCTION_URL") ?? appleProductionURL,
            sandboxURL: value("LEDGER_APPSTORE_SANDBOX_URL") ?? appleSandboxURL
        )
    }

    /// The URL that answers for `environment`.
    public func url(for environment: StoreEnvironment) -> String {
        switch environment {
        case .production: productionURL
        case .sandbox: sandboxURL
        }
    }
}
