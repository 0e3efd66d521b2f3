import AppStore
import Synchronization

/// Records how long the simulator spent handling each verify, keyed by the receipt's SHA-256, so that
/// a benchmark can subtract it from the client's end-to-end time and see what the client adds.
public final class SimulatorServerTiming: Sendable {
    // A Mutex, not an actor: the handler records without an extra hop, and the benchmark reads after the run.
    private let durations = Mutex<[String: Duration]>([:])

    public init() {}

    func record(receiptSHA256: String, _ duration: Duration) {
        durations.withLock { $0[receiptSHA256] = duration }
    }

    /// The handling time of the last verify of the receipt with this hash.
    public func duration(receiptSHA256: String) -> Duration? {
        durations.withLock { $0[receiptSHA256] }
    }
}
