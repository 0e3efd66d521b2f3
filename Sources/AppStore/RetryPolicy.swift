import Foundation

/// Bounded exponential backoff with jitter, for answers the App Store asks us to retry.
///
/// Attempt n (from 1) that fails waits a random time in `[d/2, d]` where
/// `d = min(maximumDelay, initialDelay × multiplier^(n-1))`, so that many ledgers retrying at once
/// spread out; after `maximumAttempts` tries the failure is reported.
public struct RetryPolicy: Sendable, Hashable {
    /// Tries in all, the first included; 1 means no retry.
    public var maximumAttempts: Int
    public var initialDelay: Duration
    public var maximumDelay: Duration
    public var multiplier: Double

    public init(
        maximumAttempts: Int = 4,
        initialDelay: Duration = .milliseconds(200),
        maximumDelay: Duration = .seconds(3),
        multiplier: Double = 2
    ) {
        self.maximumAttempts = max(1, maximumAttempts)
        self.initialDelay = initialDelay
        self.maximumDelay = maximumDelay
        self.multiplier = max(1, multiplier)
    }

    /// No retries: the first failure is reported.
    public static let none = RetryPolicy(maximumAttempts: 1)

    /// The upper bound of the wait after failed attempt `attempt` (from 1), before jitter.
    public func ceiling(afterAttempt attempt: Int) -> Duration {
        let exponent = Double(max(0, attempt - 1))
        let seconds = Self.seconds(initialDelay) * pow(multiplier, exponent)
        return min(maximumDelay, .nanoseconds(Int64((min(seconds, 86_400) * 1e9).rounded())))
    }

    /// The wait after failed attempt `attempt`: between half the ceiling and the ceiling.
    public func delay(afterAttempt attempt: Int, random: Double = Double.random(in: 0...1)) -> Duration {
        let ceiling = Self.seconds(ceiling(afterAttempt: attempt))
        let seconds = ceiling / 2 + ceiling / 2 * min(1, max(0, random))
        return .nanoseconds(Int64((seconds * 1e9).rounded()))
    }

    public static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
