import AsyncHTTPClient
import Foundation
import LedgerApplication
import NIOCore
import NIOHTTP1
import NIOPosix

/// POSTs webhook deliveries with AsyncHTTPClient: redirects are never followed (a 3xx is a failed
/// attempt, and its Location is never asked for), every attempt has a deadline for all of it
/// (connecting, sending, the answer's head and body), and the answer's body is read only so far.
public struct HTTPWebhookSender: WebhookSender {
    public struct Configuration: Sendable {
        /// The whole attempt, from connecting to the answer's last byte read.
        public var deadline: Duration
        /// The start of the answer kept with the attempt.
        public var keptBytes: Int
        /// Reading the answer stops here; the rest is not waited for.
        public var readLimit: Int

        public init(deadline: Duration = .seconds(10), keptBytes: Int = 4 * 1_024, readLimit: Int = 64 * 1_024) {
            self.deadline = deadline
            self.keptBytes = keptBytes
            self.readLimit = readLimit
        }

        /// One try to connect may take this long: half the deadline, 5 s at most, so that a host
        /// that never answers is reported as such before the deadline ends the attempt.
        var connectTimeout: Duration { min(.seconds(5), deadline / 2) }
    }

    let client: HTTPClient
    public let configuration: Configuration

    /// `client` should come from `makeHTTPClient()`: one that follows no redirects.
    public init(client: HTTPClient, configuration: Configuration = .init()) {
        self.client = client
        self.configuration = configuration
    }

    /// A client of its own (shut it down after use), following no redirects, with connect and
    /// read timeouts within the attempt's deadline.
    public static func makeHTTPClient(configuration: Configuration = .init()) -> HTTPClient {
        let seconds = Int64(configuration.deadline.components.seconds)
        let timeout = HTTPClient.Configuration.Timeout(
            connect: .nanoseconds(Int64(configuration.connectTimeout / .nanoseconds(1))), read: .seconds(max(seconds, 1))
        )
        var client = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: timeout)
        // As many connections to one endpoint as `WebhookDelivery` has deliveries in flight.
        client.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: client)
    }

    public func send(_ request: WebhookRequest) async -> WebhookAnswer {
        let start = ContinuousClock.now
        do {
            let (status, kept) = try await exchange(request, until: start + configuration.deadline)
            let redirect = (300..<400).contains(status)
            return WebhookAnswer(
                statusCode: status, error: redirect ? "a redirect, which is not followed: register the URL it points to" : nil,
                response: kept, duration: ContinuousClock.now - start
            )
        } catch {
            return WebhookAnswer(statusCode: nil, error: describe(error), response: nil, duration: ContinuousClock.now - start)
        }
    }

    private struct DeadlinePassed: Error {}

    /// The POST, and the status and start of its answer, by `end`. The client's own deadline
    /// covers connecting and the answer's head: it fails a request that never had a connection
    /// with the reason the last try to connect failed (a refused connection reads as such, not as
    /// a slow answer), so no timer of the sender's races it there; the sender's covers the body.
    private func exchange(_ request: WebhookRequest, until end: ContinuousClock.Instant) async throws -> (Int, String) {
        var post = HTTPClientRequest(url: request.url)
        post.method = .POST
        for (name, value) in request.headers { post.headers.add(name: name, value: value) }
        post.body = .bytes(ByteBuffer(string: request.body))
        let left = ContinuousClock.now.duration(to: end)
        let response = try await client.execute(post, deadline: .now() + .nanoseconds(Int64(left / .nanoseconds(1))))
        let kept = try await withThrowingTaskGroup(of: [UInt8]?.self) { group in
            group.addTask { try await read(response.body) }
            group.addTask {
                try await Task.sleep(until: end)
                return nil
            }
            defer { group.cancelAll() }
            guard let first = try await group.next(), let kept = first else { throw DeadlinePassed() }
            return kept
        }
        // Text the database can keep: no NUL, invalid UTF-8 replaced.
        let text = String(decoding: kept, as: UTF8.self).replacingOccurrences(of: "\u{0}", with: "")
        return (Int(response.status.code), text)
    }

    private static func isConnectTimeout(_ error: any Error) -> Bool {
        if case .connectTimeout = error as? ChannelError { return true }
        return false
    }

    /// The start of the body (`keptBytes`), read up to `readLimit`.
    private func read(_ body: HTTPClientResponse.Body) async throws -> [UInt8] {
        var kept: [UInt8] = []
        var read = 0
        for try await chunk in body {
            read += chunk.readableBytes
            if kept.count < configuration.keptBytes {
                kept += chunk.readableBytesView.prefix(configuration.keptBytes - kept.count)
            }
            if read >= configuration.readLimit { break }
        }
        return kept
    }

    /// What went wrong, in a line. The attempt's deadline reads the same whichever timer gave up
    /// (the client's deadline or its read timeout of the same length, or the sender's own for the
    /// body); connection failures in words; other errors of AsyncHTTPClient and NIO describe
    /// themselves, tersely.
    func describe(_ error: any Error) -> String {
        if error is DeadlinePassed || error as? HTTPClientError == .readTimeout || error as? HTTPClientError == .deadlineExceeded {
            return "no complete answer within \(configuration.deadline)"
        }
        if error as? HTTPClientError == .connectTimeout || Self.isConnectTimeout(error) {
            return "could not connect: the host did not answer within \(configuration.connectTimeout)"
        }
        if error as? HTTPClientError == .remoteConnectionClosed {
            return "the endpoint closed the connection before it answered"
        }
        if let failure = error as? IOError {
            if failure.errnoCode == ECONNREFUSED { return "the connection was refused: nothing listens at the URL's host and port" }
            return "the connection failed: " + String(cString: strerror(failure.errnoCode)).lowercased()
        }
        if let failure = error as? NIOConnectionError {
            if let lookup = failure.dnsAError ?? failure.dnsAAAAError {
                let reason = lookup is SocketAddressError.UnknownHost ? "no such host" : String(describing: lookup).prefix(300)
                return "could not look up \(failure.host): \(reason)"
            }
            // Each address of the host tried; the last one's reason stands for them all.
            if let last = failure.connectionErrors.last { return describe(last.error) }
        }
        return String(String(describing: error).prefix(500))
    }
}
