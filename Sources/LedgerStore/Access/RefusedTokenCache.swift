import Foundation
import Synchronization

/// Bearer tokens refused lately (by their SHA-256), so that a caller repeating a wrong or revoked
/// key is refused again without a query.
///
/// Only refusals are kept, never a key that works: revoking a key still takes effect at once. A
/// refused token stays refused for `lifetime`: keys are never un-revoked and a key's secret never
/// changes, so the only answer this could get wrong is for a key created with the very id of a
/// token tried before, which is random. At most `capacity` tokens are kept; when full, expired
/// ones go, and if none has expired, all do (a flood of distinct tokens costs a query each anyway).
final class RefusedTokenCache: Sendable {
    private struct State {
        var refusedUntil: [Data: ContinuousClock.Instant] = [:]
    }

    private let state = Mutex(State())
    let lifetime: Duration
    let capacity: Int

    init(lifetime: Duration = .seconds(60), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    func contains(_ tokenHash: Data) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in
            guard let until = state.refusedUntil[tokenHash] else { return false }
            if until > now { return true }
            state.refusedUntil[tokenHash] = nil
            return false
        }
    }

    func insert(_ tokenHash: Data) {
        let now = ContinuousClock.now
        state.withLock { state in
            if state.refusedUntil.count >= capacity {
                state.refusedUntil = state.refusedUntil.filter { $0.value > now }
                if state.refusedUntil.count >= capacity { state.refusedUntil.removeAll(keepingCapacity: true) }
            }
            state.refusedUntil[tokenHash] = now + lifetime
        }
    }
}
