/// The port a server reports once it listens, for whoever waits for it (each waiter its own copy).
struct ServerPort: Sendable {
    private let stream: AsyncStream<Int>
    private let continuation: AsyncStream<Int>.Continuation

    init() {
        (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    func report(_ port: Int) {
        continuation.yield(port)
        continuation.finish()
    }

    /// Waits for the port; fails when the server stopped before it listened.
    func value(_ what: String) async throws -> Int {
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CommandFailure(message: "\(what) stopped before it listened") }
        return port
    }
}
