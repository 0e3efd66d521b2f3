import LedgerProjections
import Metrics

/// Gauges for one projection version, as its runner follows the log.
///
/// `ledger_projection_position` is the checkpoint; `ledger_projection_lag_events` is how many
/// positions the log's head is past it: exact when caught up (0), otherwise an upper bound, since
/// positions rolled back by aborted appends leave gaps. `ledger_projection_failed` is 1 while the
/// version is stopped on a deterministic error (see `ledger projections status`), else 0.
struct ProjectionMetrics: Sendable {
    let position: Gauge
    let lag: Gauge
    let failed: Gauge

    init(_ projection: any UserProjection.Type, database: String) {
        let dimensions = [("database", database), ("projection", projection.name.rawValue), ("version", String(projection.version))]
        position = Gauge(label: "ledger_projection_position", dimensions: dimensions)
        lag = Gauge(label: "ledger_projection_lag_events", dimensions: dimensions)
        failed = Gauge(label: "ledger_projection_failed", dimensions: dimensions)
    }

    func record(position: Int64, head: Int64) {
        self.position.record(position)
        lag.record(max(0, head - position))
    }

    func recordFailed(_ isFailed: Bool) {
        failed.record(isFailed ? 1 : 0)
    }
}
