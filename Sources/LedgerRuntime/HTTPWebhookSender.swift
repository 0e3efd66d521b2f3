import AsyncHTTPClient
import Foundation
import LedgerApplication
import NIOCore
import NIOHTTP1

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
        let timeout = HTTPClient.Configuration.Timeout(connect: .seconds(min(5, max(seconds, 1))), read: .seconds(max(seconds, 1)))
        var client = HTTPClient.Configuration(redirectConfiguration: .disallow, timeout: timeout)
        // As many connections to one endpoint as `WebhookDelivery` has deliveries in flight.
        client.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = 16
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: client)
    }

    public func send(_ request: WebhookRequest) async -> WebhookAnswer {
        let start = ContinuousClock.now
        let deadline = configuration.deadline
        do {
            let (status, kept) = try await withThrowingTaskGroup(of: (Int, String)?.self) { group in
                group.addTask { try await exchange(request) }
                group.addTask {
                    try await Task.sleep(for: deadline)
                    return nil
                }
                defer { group.cancelAll() }
                guard let first = try await group.next(), let answer = first else { throw DeadlinePassed() }
                return answer
            }
            let redirect = (300..<400).contains(status)
            return WebhookAnswer(
                statusCode: status, error: redirect ? "a redirect, which is not followed: register the URL it points to" : nil,
                response: kept, duration: ContinuousClock.now - start
            )
        } catch is DeadlinePassed {
            return WebhookAnswer(statusCode: nil, error: "no complete answer within \(deadline)", response: nil, duration: ContinuousClock.now - start)
        } catch {
            return WebhookAnswer(statusCode: nil, error: Self.describe(error), response: nil, duration: ContinuousClock.now - start)
        }
    }

    private struct DeadlinePassed: Error {}

    /// The POST, and the status and start of its answer.
    private func exchange(_ request: WebhookRequest) async throws -> (Int, String) {
        var post = HTTPClientRequest(url: request.url)
        post.method = .POST
        for (name, value) in request.headers { post.headers.add(name: name, value: value) }
        post.body = .bytes(ByteBuffer(string: request.body))
        let seconds = configuration.deadline.components.seconds
        let response = try await client.execute(post, deadline: .now() + .seconds(seconds + 1))
        var kept: [UInt8] = []
        var read = 0
        for try await chunk in response.body {
            read += chunk.readableBytes
            if kept.count < configuration.keptBytes {
                kept += chunk.readableBytesView.prefix(configuration.keptBytes - kept.count)
            }
            if read >= configuration.readLimit { break }
        }
        // Text the database can keep: no NUL, invalid UTF-8 replaced.
        let text = String(decoding: kept, as: UTF8.self).replacingOccurrences(of: "\u{0}", with: "")
        return (Int(response.status.code), text)
    }

    /// What went wrong, in a line: AsyncHTTPClient's and NIO's errors describe themselves tersely.
    static func describe(_ error: any Error) -> String {
        let text = String(describing: error)
        return String(text.prefix(500))
    }
}
