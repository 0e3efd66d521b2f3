import Logging
import ServiceLifecycle

/// Runs `services` in a service group for the duration of `body`, then shuts them down gracefully,
/// whether `body` returned or threw (cancelling instead would cut open connections mid-request).
/// `onExit` runs when the group stops, also when it fails to start (so that a wait for a port ends).
public func withRunningServices<T: Sendable>(
    _ services: [any Service],
    logger: Logger,
    onExit: @escaping @Sendable () -> Void = {},
    _ body: () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: services, logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            defer { onExit() }
            try await group.run()
        }
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}

/// A test harness could not set up what the test needs.
public struct HarnessError: Error, CustomStringConvertible {
    public let message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
