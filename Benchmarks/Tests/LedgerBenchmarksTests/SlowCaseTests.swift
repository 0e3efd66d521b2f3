import LedgerBenchmarks
import Testing

/// A signed case past its deadline is timed again before it counts as slow: a pause of a busy
/// machine passes, a case slow every time does not. The tries' times are scripted (no clock).
@Suite struct SlowCaseTests {
    /// Times `scripted` one by one, counting how often the case was sent again.
    final class Tries {
        var scripted: [Duration]
        var sent = 0
        init(_ scripted: [Duration]) { self.scripted = scripted }
        func next() -> Duration {
            sent += 1
            return scripted.removeFirst()
        }
    }

    @Test func aCaseAnsweredInTimeOnItsSecondTryIsNotSlow() async throws {
        let again = Tries([.milliseconds(40)])
        let tries = try await LedgerAPIFuzz.timedAgain(first: .seconds(6)) { again.next() }
        #expect(tries == [.seconds(6), .milliseconds(40)])
        #expect(again.sent == 1)
    }

    @Test func aCaseSlowEveryTimeIsTriedThreeTimesInAll() async throws {
        let again = Tries([.seconds(7), .seconds(8), .seconds(9)])
        let tries = try await LedgerAPIFuzz.timedAgain(first: .seconds(6)) { again.next() }
        #expect(tries == [.seconds(6), .seconds(7), .seconds(8)])
        #expect(again.sent == 2, "sent twice more, no more")
    }

    @Test func theThirdTryInTimeIsNotSlow() async throws {
        let again = Tries([.seconds(7), .milliseconds(40)])
        let tries = try await LedgerAPIFuzz.timedAgain(first: .seconds(6)) { again.next() }
        #expect(tries == [.seconds(6), .seconds(7), .milliseconds(40)])
        #expect(!tries.allSatisfy { $0 > LedgerAPIFuzz.signedDeadline })
    }

    @Test func theDeadlineItselfIsInTime() async throws {
        let again = Tries([.seconds(5)])
        let tries = try await LedgerAPIFuzz.timedAgain(first: .seconds(6), deadline: .seconds(5)) { again.next() }
        #expect(tries == [.seconds(6), .seconds(5)], "an answer at exactly the deadline is in time")
    }
}
