import LedgerDomain
import Metrics

/// What `AppStoreReceiptVerifier` reports through swift-metrics, one observation per HTTP exchange.
///
/// Made with the verifier, not as statics, so a verifier made after `MetricsSystem.bootstrap`
/// reports to the bootstrapped backend whatever touched this type first.
struct AppStoreMetrics: Sendable {
    /// How one HTTP exchange with `verifyReceipt` ended, as the `status` dimension spells it.
    enum Outcome: Sendable, Hashable {
        /// A `verifyReceipt` answer with this receipt status (0, 21007, 21100, …).
        case receiptStatus(Int)
        /// The exchange did not complete in time.
        case timeout
        /// No connection, or it broke before an answer.
        case connectionError
        /// An HTTP status other than 200.
        case http(Int)
        /// HTTP 200 whose body is not a `verifyReceipt` answer, or is too large.
        case malformedResponse

        var label: String {
            switch self {
            case .receiptStatus(let code): String(code)
            case .timeout: "timeout"
            case .connectionError: "connection_error"
            case .http(let code): "http_\(code)"
            case .malformedResponse: "malformed_response"
            }
        }
    }

    private let durations: [StoreEnvironment: Timer]

    init() {
        durations = Dictionary(uniqueKeysWithValues: StoreEnvironment.allCases.map { environment in
            (environment, Timer(
                label: "ledger_appstore_request_duration_seconds",
                dimensions: [("environment", environment.rawValue)],
                preferredDisplayUnit: .seconds
            ))
        })
    }

    /// Records one exchange. The counter is looked up per call because its `status` dimension is
    /// open-ended; the backend hands back the same time series for the same dimensions.
    func record(_ outcome: Outcome, environment: StoreEnvironment, duration: Duration) {
        durations[environment]?.record(duration: duration)
        Counter(
            label: "ledger_appstore_requests_total",
            dimensions: [("environment", environment.rawValue), ("status", outcome.label)]
        ).increment()
    }
}
