import Foundation
import Hummingbird
import LedgerApplication
import Logging
import NIOCore
import Synchronization

/// The app's own server, as far as the demo needs one: it takes the ledger's webhooks on
/// loopback, checks each one's signature with the endpoint's secret, and keeps them.
public final class DemoAppServer: Sendable {
    public struct Received: Sendable {
        public let id: String
        public let body: String
        public let signatureVerified: Bool
    }

    private let received = Mutex<[Received]>([])
    private let secret = Mutex<WebhookSecret?>(nil)

    public init() {}

    public var webhooks: [Received] { received.withLock { $0 } }

    /// The secret the ledger gave when the endpoint was added.
    func trust(_ text: String) {
        secret.withLock { $0 = WebhookSecret(text: text) }
    }

    /// The receiver, to run beside the demo (`onRunning` gets its base URL).
    public func application(logger: Logger, onRunning: @escaping @Sendable (String) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        router.post("webhooks") { [self] request, _ -> Response in
            let body = String(buffer: try await request.body.collect(upTo: 1 << 20))
            let id = request.headers[.init("webhook-id")!] ?? ""
            let timestamp = request.headers[.init("webhook-timestamp")!].flatMap { Int64($0) }
            let signatures = request.headers[.init("webhook-signature")!] ?? ""
            let verified = secret.withLock { secret -> Bool in
                guard let secret, let timestamp else { return false }
                let expected = WebhookSigner(secret: secret).signature(id: id, timestamp: timestamp, body: body)
                return signatures.split(separator: " ").contains { $0 == expected }
            }
            received.withLock { $0.append(Received(id: id, body: body, signatureVerified: verified)) }
            return Response(status: verified ? .noContent : .unauthorized)
        }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "demo-app-server"),
                           onServerRunning: { await onRunning("http://127.0.0.1:\($0.localAddress?.port ?? 0)") }, logger: logger)
    }
}
