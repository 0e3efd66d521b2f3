/// The port a server reports once it listens, for whoever waits for it (each waiter its own copy).
public struct ServerPort: Sendable {
    private let stream: AsyncStream<Int>
    private let continuation: AsyncStream<Int>.Continuation

    public init() {
        (stream, continuation) = AsyncStream<Int>.makeStream(bufferingPolicy: .bufferingNewest(1))
    }

    public func report(_ port: Int) {
        continuation.yield(port)
        continuation.finish()
    }

    /// The server stopped without listening: whoever waits is told so.
    public func stopped() {
        continuation.finish()
    }

    /// Waits for the port; fails when the server stopped before it listened.
    public func value(_ what: String = "the server") async throws -> Int {
        var iterator = stream.makeAsyncIterator()
        guard let port = await iterator.next() else { throw ServerStopped(what: what) }
        return port
    }
}

/// A server that stopped before it listened.
public struct ServerStopped: Error, CustomStringConvertible {
    public let what: String
    public var description: String { "\(what) stopped before it listened" }
}
