/// How the ledger stands, for `/health`: read in constant time however long the log.
public protocol HealthCheck: Sendable {
    func health(thresholds: LedgerHealth.Thresholds) async throws -> LedgerHealth
}
