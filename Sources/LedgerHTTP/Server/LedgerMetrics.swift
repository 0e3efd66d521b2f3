import Metrics
import Prometheus

/// The process's metrics backend: swift-metrics bootstrapped onto one Prometheus registry.
///
/// Library code (the store, the App Store client, the HTTP middleware) reports through
/// swift-metrics only; this is the one place that chooses Prometheus.
public enum LedgerMetrics {
    /// Bootstrapped on first use; Swift runs a static initialiser once per process, and
    /// `MetricsSystem.bootstrap` may only run once.
    private static let registry: PrometheusCollectorRegistry = {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        return registry
    }()

    /// Bootstraps `MetricsSystem` with Prometheus the first time; every call returns the same
    /// registry. Call it before creating the store, verifier and middleware: a metric made
    /// before the bootstrap reports nowhere.
    @discardableResult
    public static func bootstrap() -> PrometheusCollectorRegistry {
        registry
    }
}
