import LedgerDomain
import Metrics

/// What `PostgresEventStore.append` reports through swift-metrics.
///
/// Created with the store rather than as statics: swift-metrics binds a metric to the factory
/// bootstrapped when the metric is created, so a store made after `MetricsSystem.bootstrap`
/// always reports, whatever touched the store type first.
struct AppendMetrics: Sendable {
    /// Events written (duplicates not counted).
    let appended = Counter(label: "ledger_events_appended_total")
    /// Events whose deduplication key was already recorded: the stored event was returned instead.
    let duplicates = Counter(label: "ledger_append_duplicates_total")
    /// Appends refused because the stream was not at the expected version.
    let conflicts = Counter(label: "ledger_append_conflicts_total")
    /// Wall time of one `append` call, retries included, whatever its outcome.
    let duration = Timer(label: "ledger_append_duration_seconds", preferredDisplayUnit: .seconds)

    /// Counts what one successful append did.
    func record(_ result: AppendResult) {
        let appendedCount = result.appendedCount
        if appendedCount > 0 { appended.increment(by: appendedCount) }
        let duplicateCount = result.outcomes.count - appendedCount
        if duplicateCount > 0 { duplicates.increment(by: duplicateCount) }
    }
}
