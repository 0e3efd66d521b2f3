import Foundation
import Hummingbird
import LedgerRuntime
import LedgerTesting
import Logging
import NIOCore
import Synchronization

/// A webhook endpoint on 127.0.0.1 for tests: it keeps every request it gets, on any of its
/// paths, and answers each as the test's script says (a status, after a delay, with headers).
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        let method: String
        let path: String
        /// Header names in lower case.
        let headers: [String: String]
        let body: Data
        /// 1 for the first request to this path.
        let number: Int

        var webhookID: String? { headers["webhook-id"] }
    }

    struct Reply: Sendable {
        var status = 200
        var delay: Duration = .zero
        /// A `Location` header, for a redirect.
        var location: String?
        var body = "ok"
        /// When set, the head is sent at once and the body one byte at a time, this long apart.
        var trickle: Duration?
    }

    private let received = Mutex<[Received]>([])
    private let script: @Sendable (Received) -> Reply

    init(script: @escaping @Sendable (Received) -> Reply) {
        self.script = script
    }

    /// Every request so far, in the order they came.
    var requests: [Received] { received.withLock { $0 } }

    func requests(to path: String) -> [Received] { requests.filter { $0.path == "/" + path } }

    /// Runs the receiver for `body`, which gets its base URL (`http://127.0.0.1:<port>`).
    func run<T: Sendable>(paths: [String], _ body: (String) async throws -> T) async throws -> T {
        let router = Router()
        for path in paths {
            for method in [HTTPRequest.Method.post, .get] {
                router.on(RouterPath(path), method: method) { [self] request, _ -> Response in
                    let bytes = try await request.body.collect(upTo: 1 << 20)
                    var headers: [String: String] = [:]
                    for field in request.headers { headers[field.name.canonicalName] = field.value }
                    let arrival = received.withLock { all -> Received in
                        let number = all.filter { $0.path == request.uri.path }.count + 1
                        let arrival = Received(method: request.method.rawValue, path: request.uri.path, headers: headers,
                                               body: Data(bytes.readableBytesView), number: number)
                        all.append(arrival)
                        return arrival
                    }
                    let reply = script(arrival)
                    if reply.delay > .zero { try? await Task.sleep(for: reply.delay) }
                    var response = Response(status: .init(code: reply.status), body: .init(byteBuffer: ByteBuffer(string: reply.body)))
                    if let pause = reply.trickle {
                        response.body = ResponseBody { writer in
                            for byte in reply.body.utf8 {
                                try await writer.write(ByteBuffer(bytes: [byte]))
                                try await Task.sleep(for: pause)
                            }
                            try await writer.finish(nil)
                        }
                    }
                    if let location = reply.location { response.headers[.location] = location }
                    return response
                }
            }
        }
        let port = ServerPort()
        let application = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "webhook-receiver"),
            onServerRunning: { channel in port.report(channel.localAddress?.port ?? 0) }, logger: TestDatabase.logger
        )
        return try await withRunningServices([application], logger: TestDatabase.logger) {
            try await body("http://127.0.0.1:\(try await port.value("the webhook receiver"))")
        }
    }
}
