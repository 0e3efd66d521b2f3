import Foundation
import Logging
import ServiceLifecycle

/// Runs `services` in a service group for the duration of `body`, then shuts them down gracefully.
func withRunningServices<T: Sendable>(
    _ services: [any Service],
    logger: Logger,
    _ body: () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: services, logger: logger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask { try await group.run() }
        let result: Result<T, any Error>
        do { result = .success(try await body()) } catch { result = .failure(error) }
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}

/// Collects the port a server reports from `onServerRunning`.
struct PortReporter: Sendable {
    let stream: AsyncStream<Int>
    let continuation: AsyncStream<Int>.Continuation

    init() {
        (stream, continuation) = AsyncStream<Int>.makeStream()
    }

    func report(_ port: Int) {
        continuation.yield(port)
    }

    func port() async throws -> Int {
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw HarnessError(message: "the server stopped before it listened") }
        return port
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
