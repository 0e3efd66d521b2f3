import AppStore
import AsyncHTTPClient
import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import ServiceLifecycle

/// A logger that keeps test output to warnings and worse.
let quietLogger: Logger = {
    var logger = Logger(label: "appstore-tests")
    logger.logLevel = .warning
    return logger
}()

/// Runs `services` in a service group for the duration of `body`, then shuts them down gracefully,
/// whether `body` returned or threw (cancelling instead would cut open connections mid-request).
/// `onExit` runs when the group stops, also when it fails to start (so that a wait for a port ends).
func withRunningServices<T: Sendable>(
    _ services: [any Service],
    onExit: @escaping @Sendable () -> Void = {},
    _ body: () async throws -> T
) async throws -> T {
    let group = ServiceGroup(configuration: .init(services: services, logger: quietLogger))
    return try await withThrowingTaskGroup(of: Void.self) { tasks in
        tasks.addTask {
            defer { onExit() }
            try await group.run()
        }
        let result = await Result(catching: body)
        await group.triggerGracefulShutdown()
        try await tasks.waitForAll()
        return try result.get()
    }
}

extension Result where Failure == any Error {
    init(catching body: () async throws -> Success) async {
        do {
            self = .success(try await body())
        } catch {
            self = .failure(error)
        }
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
        continuation.finish()
    }

    /// The port, or an error when the server stopped before it listened.
    func port() async throws -> Int {
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else {
            throw HarnessError(message: "the server stopped before it listened")
        }
        return port
    }

    func serverStopped() {
        continuation.finish()
    }
}

/// One HTTP exchange with a JSON body, for admin calls and raw `verifyReceipt` posts.
func sendJSON(_ method: HTTPMethod, _ url: String, _ body: [String: Any]? = nil) async throws -> (status: Int, json: Any?) {
    var request = HTTPClientRequest(url: url)
    request.method = method
    if let body {
        request.headers.add(name: "Content-Type", value: "application/json")
        request.body = .bytes(ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: body)))
    }
    let response = try await HTTPClient.shared.execute(request, timeout: .seconds(10))
    let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
    let data = Data(bytes.readableBytesView)
    let json = data.isEmpty ? nil : try? JSONSerialization.jsonObject(with: data)
    return (Int(response.status.code), json)
}
