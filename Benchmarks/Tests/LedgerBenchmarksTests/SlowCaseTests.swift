import LedgerBenchmarks
import Testing

/// A signed case past its deadline is timed again before it counts as slow: a pause of a busy
/// machine passes, a case slow every time does not.
@Suite struct SlowCaseTests {
    /// Answers after `pauses[n]` on its n-th call (the last pause repeats), counting the calls.
    actor Endpoint {
        let pauses: [Duration]
        private(set) var calls = 0
        init(pauses: [Duration]) { self.pauses = pauses }
        func answer() async throws -> Int {
            let pause = pauses[min(calls, pauses.count - 1)]
            calls += 1
            try await Task.sleep(for: pause)
            return calls
        }
    }

    @Test func aCaseAnsweredInTimeOnItsSecondTryIsNotSlow() async throws {
        let endpoint = Endpoint(pauses: [.zero])
        let tries = try await LedgerAPIFuzz.timedAgain({ try await endpoint.answer() }, first: .seconds(2), deadline: .seconds(1))
        #expect(tries.count == 2, "sent once more, answered in time: \(tries)")
        #expect(tries[0] == .seconds(2))
        #expect(tries[1] < .seconds(1))
        #expect(await endpoint.calls == 1)
    }

    @Test func aCaseSlowEveryTimeIsSentTwiceMoreAndEachTryIsPastTheDeadline() async throws {
        let endpoint = Endpoint(pauses: [.milliseconds(300)])
        let tries = try await LedgerAPIFuzz.timedAgain({ try await endpoint.answer() }, first: .seconds(1), deadline: .milliseconds(200))
        #expect(tries.count == 3, "three tries in all: \(tries)")
        #expect(tries.allSatisfy { $0 > .milliseconds(200) })
        #expect(await endpoint.calls == 2)
    }

    @Test func theThirdTryIsTheLast() async throws {
        let endpoint = Endpoint(pauses: [.milliseconds(300), .zero])
        let tries = try await LedgerAPIFuzz.timedAgain({ try await endpoint.answer() }, first: .seconds(1), deadline: .milliseconds(200))
        #expect(tries.count == 3)
        #expect(tries[1] > .milliseconds(200))
        #expect(tries[2] < .milliseconds(200), "answered in time on the third try: not slow")
        #expect(await endpoint.calls == 2)
    }
}
