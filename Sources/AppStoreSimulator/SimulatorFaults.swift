import AppStore

/// Faults the simulator injects into `verifyReceipt`, for testing how callers cope.
public struct SimulatorFaults: Codable, Hashable, Sendable {
    /// How many of the next verify calls answer `failStatus` instead of verifying.
    public var failNext: Int
    /// 21005 (server unavailable) by default; 21100–21199 with `isRetryable` imitate internal errors.
    public var failStatus: Int
    /// The `is-retryable` flag sent with `failStatus`.
    public var isRetryable: Bool
    /// Added to every verify call before it answers.
    public var latencyMilliseconds: Int
    /// When not 0, every verify call sends its answer's head at once and then its body a few bytes
    /// at a time, spread over this many milliseconds: a slow network or a stalled server, which a
    /// client's deadline must cover to the last byte.
    public var trickleMilliseconds: Int
    /// How many of the next App Store Server API calls answer 429 with Apple's `Retry-After` (a
    /// UNIX time in milliseconds, a second ahead).
    public var serverAPITooManyRequests: Int
    /// How many of the next App Store Connect sales report calls answer 429 (`Retry-After: 1`).
    public var connectTooManyRequests: Int

    public init(
        failNext: Int = 0, failStatus: Int = 21005, isRetryable: Bool = false, latencyMilliseconds: Int = 0,
        trickleMilliseconds: Int = 0, serverAPITooManyRequests: Int = 0, connectTooManyRequests: Int = 0
    ) {
        self.connectTooManyRequests = connectTooManyRequests
        self.failNext = failNext
        self.failStatus = failStatus
        self.isRetryable = isRetryable
        self.latencyMilliseconds = latencyMilliseconds
        self.trickleMilliseconds = trickleMilliseconds
        self.serverAPITooManyRequests = serverAPITooManyRequests
    }

    enum CodingKeys: String, CodingKey {
        case failNext, failStatus, isRetryable, latencyMilliseconds, trickleMilliseconds, serverAPITooManyRequests, connectTooManyRequests
    }

    /// Absent keys keep their defaults, so `{"failNext": 3}` is enough.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            failNext: try container.decodeIfPresent(Int.self, forKey: .failNext) ?? 0,
            failStatus: try container.decodeIfPresent(Int.self, forKey: .failStatus) ?? 21005,
            isRetryable: try container.decodeIfPresent(Bool.self, forKey: .isRetryable) ?? false,
            latencyMilliseconds: try container.decodeIfPresent(Int.self, forKey: .latencyMilliseconds) ?? 0,
            trickleMilliseconds: try container.decodeIfPresent(Int.self, forKey: .trickleMilliseconds) ?? 0,
            serverAPITooManyRequests: try container.decodeIfPresent(Int.self, forKey: .serverAPITooManyRequests) ?? 0,
            connectTooManyRequests: try container.decodeIfPresent(Int.self, forKey: .connectTooManyRequests) ?? 0
        )
    }
}
