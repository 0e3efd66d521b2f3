/// How long a delivery waits after each failed attempt before the next, and when it is parked.
///
/// The default waits 10 s, 1 min, 5 min, 15 min, 30 min, 1 h, 2 h, 4 h, 6 h, 6 h and 6 h: twelve
/// attempts over some 26 hours, then the delivery is parked. Each wait is lengthened by up to
/// `jitter` of itself at random, so that deliveries failed together do not return together.
public struct WebhookRetrySchedule: Sendable, Hashable {
    /// The wait after the first, second, … failed attempt; after the last, the delivery is parked.
    public var delays: [Duration]
    /// The largest share of a wait added to it at random (0.1: up to 10% longer).
    public var jitter: Double

    public init(delays: [Duration], jitter: Double = 0.1) {
        self.delays = delays
        self.jitter = jitter
    }

    public static let standard = WebhookRetrySchedule(delays: [
        .seconds(10), .seconds(60), .seconds(300), .seconds(900), .seconds(1_800), .seconds(3_600),
        .seconds(7_200), .seconds(14_400), .seconds(21_600), .seconds(21_600), .seconds(21_600),
    ])

    /// The wait after the `failed`-th failed attempt of this round (1 for the first), nil when
    /// the delivery is to be parked.
    public func delay(afterFailure failed: Int) -> Duration? {
        guard failed >= 1, failed <= delays.count else { return nil }
        let base = delays[failed - 1]
        guard jitter > 0 else { return base }
        return base + base * Double.random(in: 0...jitter)
    }

    /// Every wait added up, without jitter: how long a dead endpoint is tried.
    public var total: Duration { delays.reduce(.zero, +) }
}
