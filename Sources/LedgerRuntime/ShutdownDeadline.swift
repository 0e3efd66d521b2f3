import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// Ends the process if a graceful shutdown has not ended the server within `patience`.
///
/// The HTTP server's graceful shutdown waits for every request it has, and the waits postgres-nio
/// can leave unanswered are given up (see `unlessClosed`), but should anything still wait, the
/// process must not hang. Nothing is lost by leaving: every write is one transaction, committed or
/// not. `disarm()` once the server has stopped: the process may have more to do (a benchmark).
public final class ShutdownDeadline: Service, Sendable {
    static let patience = Duration.seconds(15)
    private let logger: Logger
    private let timer = Mutex<Task<Void, Never>?>(nil)

    public init(logger: Logger) {
        self.logger = logger
    }

    public func run() async throws {
        try? await gracefulShutdown()
        guard !Task.isCancelled else { return }
        let logger = logger
        // Detached: the group cancels its services' tasks as it shuts down; this must outlive them.
        let task = Task.detached {
            try? await Task.sleep(for: Self.patience)
            guard !Task.isCancelled else { return }
            logger.error("shutdown did not finish within \(Self.patience): a request or a projection batch still waits; exiting now (a write not yet committed was not recorded: sent again, it is recorded once)")
            exit(EXIT_FAILURE)
        }
        timer.withLock { $0 = task }
    }

    public func disarm() {
        timer.withLock { $0 }?.cancel()
    }
}
