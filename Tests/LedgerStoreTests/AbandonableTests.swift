import LedgerStore
import Synchronization
import Testing

/// `untilAbandoned`: a wait given up in time, and what comes too late handed back to be released.
@Suite struct AbandonableTests {
    final class Released: Sendable {
        let values = Mutex<[Int]>([])
    }

    @Test func aResultThatComesAfterTheWaitWasGivenUpIsHandedBackNotDropped() async throws {
        let released = Released()
        let late = AsyncStream<Void>.makeStream()
        // The operation finishes only when the test lets it, after the wait was given up: a loaded machine cannot reorder the two.
        let gate = AsyncStream<Void>.makeStream()
        await #expect(throws: TimedOut.self) {
            try await untilAbandoned(after: .milliseconds(20), discardingLate: { value in
                released.values.withLock { $0.append(value) }
                late.continuation.finish()
            }) {
                for await _ in gate.stream {}
                return 7
            }
        }
        #expect(released.values.withLock { $0 }.isEmpty, "not yet: the operation still runs")
        gate.continuation.finish()
        for await _ in late.stream {}
        #expect(released.values.withLock { $0 } == [7])
    }

    @Test func aResultInTimeIsTheAnswerAndNothingIsDiscarded() async throws {
        let released = Released()
        let value = try await untilAbandoned(after: .seconds(5), discardingLate: { value in released.values.withLock { $0.append(value) } }) {
            42
        }
        #expect(value == 42)
        try await Task.sleep(for: .milliseconds(20))
        #expect(released.values.withLock { $0 }.isEmpty)
    }
}
