@testable import AppStore
import Testing

@Suite struct RetryPolicyTests {
    let policy = RetryPolicy(maximumAttempts: 6, initialDelay: .milliseconds(100), maximumDelay: .seconds(1), multiplier: 2)

    @Test func backoffGrowsExponentiallyUpToTheCap() {
        #expect(policy.ceiling(afterAttempt: 1) == .milliseconds(100))
        #expect(policy.ceiling(afterAttempt: 2) == .milliseconds(200))
        #expect(policy.ceiling(afterAttempt: 3) == .milliseconds(400))
        #expect(policy.ceiling(afterAttempt: 5) == .seconds(1))
        #expect(policy.ceiling(afterAttempt: 60) == .seconds(1), "never beyond maximumDelay, even for absurd attempt numbers")
    }

    @Test func jitterStaysBetweenHalfTheCeilingAndTheCeiling() {
        for attempt in 1...8 {
            let ceiling = policy.ceiling(afterAttempt: attempt)
            #expect(policy.delay(afterAttempt: attempt, random: 0) == ceiling / 2)
            #expect(policy.delay(afterAttempt: attempt, random: 1) == ceiling)
            let random = policy.delay(afterAttempt: attempt)
            #expect(random >= ceiling / 2 && random <= ceiling)
        }
    }

    @Test func atLeastOneAttemptIsMade() {
        #expect(RetryPolicy(maximumAttempts: 0).maximumAttempts == 1)
        #expect(RetryPolicy.none.maximumAttempts == 1)
    }
}
