import Synchronization

/// A `HealthCheck` that answers from the last reading while it is younger than `maximumAge`, and
/// lets every probe that arrives while a reading is under way wait for that one reading.
///
/// Load balancers probe `/health` many times a second, from every balancer. Reading the database
/// for each probe held the route to a tenth of a static route's rate (issue 36); one reading a
/// second serves them all. The database's reachability is not part of what is kept: the HTTP route
/// asks the database monitor, in memory, on every probe. A reading that fails is not kept, so the
/// next probe reads again.
public final class RecentHealth: HealthCheck {
    private struct Kept {
        var reading: LedgerHealth
        var readAt: ContinuousClock.Instant
        var thresholds: LedgerHealth.Thresholds
    }

    private struct State {
        var kept: Kept?
        var inFlight: (thresholds: LedgerHealth.Thresholds, task: Task<LedgerHealth, any Error>)?
    }

    private let source: any HealthCheck
    private let maximumAge: Duration
    private let state = Mutex(State())

    public init(_ source: any HealthCheck, maximumAge: Duration = .seconds(1)) {
        self.source = source
        self.maximumAge = maximumAge
    }

    public func health(thresholds: LedgerHealth.Thresholds) async throws -> LedgerHealth {
        let now = ContinuousClock.now
        let task = state.withLock { state -> Task<LedgerHealth, any Error>? in
            if let kept = state.kept, kept.thresholds == thresholds, now - kept.readAt < maximumAge { return nil }
            if let inFlight = state.inFlight, inFlight.thresholds == thresholds { return inFlight.task }
            let task = Task { [source] in try await source.health(thresholds: thresholds) }
            state.inFlight = (thresholds, task)
            return task
        }
        guard let task else {
            return try state.withLock { state in
                guard let kept = state.kept else { throw CancellationError() }
                return kept.reading
            }
        }
        do {
            let reading = try await task.value
            state.withLock { state in
                if state.inFlight?.task == task { state.inFlight = nil }
                if state.kept.map({ $0.readAt < now }) ?? true {
                    state.kept = Kept(reading: reading, readAt: now, thresholds: thresholds)
                }
            }
            return reading
        } catch {
            state.withLock { state in
                if state.inFlight?.task == task { state.inFlight = nil }
            }
            throw error
        }
    }
}
