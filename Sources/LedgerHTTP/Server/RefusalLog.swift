import Foundation
import Logging
import Synchronization

/// Log lines about refused strangers, at most `perMinute` a minute: one stranger's flood of bad
/// payloads must not become a flood of log lines. What is held back is counted and said in the
/// next line written.
final class RefusalLog: Sendable {
    private struct Window {
        var started: ContinuousClock.Instant
        var written = 0
        var heldBack = 0
    }

    let perMinute: Int
    private let window: Mutex<Window>

    init(perMinute: Int = 30) {
        self.perMinute = perMinute
        self.window = Mutex(Window(started: .now))
    }

    /// Writes `message` with `metadata` at warning level, unless the minute's lines are spent.
    func warning(_ message: @autoclosure () -> Logger.Message, metadata: Logger.Metadata, to logger: Logger) {
        let (write, heldBack) = window.withLock { window -> (Bool, Int) in
            let now = ContinuousClock.now
            if now - window.started >= .seconds(60) {
                let heldBack = window.heldBack
                window = Window(started: now, written: 1)
                return (true, heldBack)
            }
            guard window.written < perMinute else {
                window.heldBack += 1
                return (false, 0)
            }
            window.written += 1
            return (true, 0)
        }
        guard write else { return }
        var metadata = metadata
        if heldBack > 0 { metadata["ledger.refusals_not_logged"] = "\(heldBack)" }
        logger.warning(message(), metadata: metadata)
    }
}
