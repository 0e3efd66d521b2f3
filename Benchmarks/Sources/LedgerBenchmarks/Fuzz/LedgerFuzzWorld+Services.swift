import Logging
import ServiceLifecycle

/// The world could not be set up; says what failed.
public struct FuzzSetupError: Error, CustomStringConvertible {
    public let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// The port a server of the world reports once it listens.
struct FuzzPort: Sendable {
    private let stream: AsyncStream<Int>
    private let continuation: AsyncStream<Int>.Continuation

    init() {
        (stream, continuation) = AsyncStream<Int>.makeStream()
    }

    func report(_ port: Int) {
        continuation.yield(port)
    }

    func finish() {
        continuation.finish()
    }

    func port() async throws -> Int {
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw FuzzSetupError("a server of the fuzzer stopped before it listened") }
        return port
    }
}

/// Runs `services` for the duration of `body`, then shuts them down gracefully. `onExit` runs
/// when the group stops, also when a service fails to start (so that a wait for its port ends).
func withFuzzServices<T: Sendable>(
    _ services: [any Service], logger: Logger, onExit: @escaping @Sendable () -> Void, _ body: () async throws -> T
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
