import LedgerApplication
import Logging

/// `HealthCheck` over the ledger's database (see `LedgerHealth.read`), answered within about a
/// second even when the database stops answering mid-way (the pool would queue the reads until it
/// gives up): given up on when the monitor sees the database down (it probes every second), or
/// after 10 s of a database too slow to call healthy. Given up rather than awaited (see
/// `untilAbandoned`).
public struct PostgresHealthCheck: HealthCheck {
    let client: DatabasePool
    let monitor: DatabaseMonitor?
    let logger: Logger

    public init(client: DatabasePool, monitor: DatabaseMonitor?, logger: Logger) {
        self.client = client
        self.monitor = monitor
        self.logger = logger
    }

    public func health(thresholds: LedgerHealth.Thresholds) async throws -> LedgerHealth {
        try await untilAbandoned { [client, logger] in
            try await LedgerHealth.read(client, thresholds: thresholds, logger: logger)
        } abandonWhen: { [monitor] in
            await withTaskGroup(of: Void.self) { race in
                if let monitor { race.addTask { await monitor.waitUntilDown() } }
                race.addTask { try? await Task.sleep(for: .seconds(10)) }
                await race.next()
                race.cancelAll()
            }
            return TimedOut(limit: .seconds(10))
        }
    }
}
