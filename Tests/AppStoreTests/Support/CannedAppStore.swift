import AppStore
import Foundation
import Hummingbird
import LedgerDomain
import LedgerRuntime
import LedgerTesting
import Logging
import Synchronization

/// A tiny real HTTP server with `/production/verifyReceipt` and `/sandbox/verifyReceipt` that answer
/// scripted bodies, so the client is tested over real HTTP against every status, not against a mock.
final class CannedAppStore: Sendable {
    enum Reply: Sendable {
        /// HTTP 200 with this JSON text.
        case json(String)
        /// HTTP 200 with `{"status": code}` (and `is-retryable` when given).
        case status(Int, isRetryable: Bool? = nil)
        /// Another HTTP status, empty body.
        case http(Int)
        /// Wait this long, then answer the JSON.
        case slow(milliseconds: Int, String)
        /// Send the head at once, then the JSON a byte at a time, spread over this long.
        case trickle(milliseconds: Int, String)
    }

    /// What the client sent.
    struct Received: Sendable {
        let environment: StoreEnvironment
        let body: Data

        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] ?? [:] }
    }

    private struct State {
        var replies: [StoreEnvironment: [Reply]]
        var received: [Received] = []
    }

    private let state: Mutex<State>

    /// Each environment answers its replies in order, repeating the last one when they run out.
    init(_ replies: [StoreEnvironment: [Reply]]) {
        state = Mutex(State(replies: replies))
    }

    var received: [Received] { state.withLock { $0.received } }

    func count(_ environment: StoreEnvironment) -> Int {
        received.filter { $0.environment == environment }.count
    }

    private func next(_ environment: StoreEnvironment, body: Data) -> Reply {
        state.withLock { state in
            state.received.append(Received(environment: environment, body: body))
            var queue = state.replies[environment] ?? []
            guard let reply = queue.first else { return .http(404) }
            if queue.count > 1 { queue.removeFirst() }
            state.replies[environment] = queue
            return reply
        }
    }

    /// Runs the server for `body`, handing it a configuration that points at it with tiny retry delays.
    func run<T: Sendable>(
        maximumAttempts: Int = 3,
        timeout: Duration = .seconds(5),
        _ body: (AppStoreConfiguration) async throws -> T
    ) async throws -> T {
        let router = Router()
        for environment in StoreEnvironment.allCases {
            router.post("/\(environment.rawValue)/verifyReceipt") { request, context -> Response in
                let bytes = try await request.body.collect(upTo: context.maxUploadSize)
                let reply = self.next(environment, body: Data(bytes.readableBytesView))
                switch reply {
                case .json(let text):
                    return Self.response(.ok, text)
                case .status(let code, let isRetryable):
                    let flag = isRetryable.map { ",\"is-retryable\":\($0)" } ?? ""
                    return Self.response(.ok, "{\"status\":\(code)\(flag)}")
                case .http(let code):
                    return Response(status: .init(code: code))
                case .slow(let milliseconds, let text):
                    try await Task.sleep(for: .milliseconds(milliseconds))
                    return Self.response(.ok, text)
                case .trickle(let milliseconds, let text):
                    let bytes = Array(text.utf8)
                    var headers = HTTPFields()
                    headers[.contentType] = "application/json"
                    return Response(status: .ok, headers: headers, body: .init(contentLength: bytes.count) { writer in
                        for byte in bytes {
                            try await Task.sleep(for: .milliseconds(milliseconds) / bytes.count)
                            try await writer.write(ByteBuffer(bytes: [byte]))
                        }
                        try await writer.finish(nil)
                    })
                }
            }
        }
        let reporter = ServerPort()
        let app = Application(
            router: router,
            configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in reporter.report(channel.localAddress?.port ?? 0) },
            logger: quietLogger
        )
        return try await withRunningServices([app], logger: quietLogger, onExit: reporter.stopped) {
            let base = "http://127.0.0.1:\(try await reporter.value())"
            return try await body(AppStoreConfiguration(
                productionURL: base + "/production/verifyReceipt",
                sandboxURL: base + "/sandbox/verifyReceipt",
                timeout: timeout,
                retry: RetryPolicy(maximumAttempts: maximumAttempts, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(5))
            ))
        }
    }

    private static func response(_ status: HTTPResponse.Status, _ text: String) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}

/// The text of a fixture in the real service's shape.
func fixture(_ name: String) throws -> String {
    guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Fixtures") else {
        throw HarnessError(message: "no fixture \(name).json")
    }
    return try String(contentsOf: url, encoding: .utf8)
}
