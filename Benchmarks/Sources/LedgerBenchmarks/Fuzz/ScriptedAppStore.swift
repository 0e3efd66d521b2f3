import Foundation
import Hummingbird
import Logging
import NIOCore

/// The App Store behind the fuzzer's second server: every `verifyReceipt` gets the answer set last.
public final class ScriptedAppStore: Sendable {
    private let state = ScriptedAnswer()

    /// Answers every following `verifyReceipt` with `answer`, byte for byte.
    func script(_ answer: Data) async {
        await state.set(answer)
    }

    func application(logger: Logger, onServerRunning: @escaping @Sendable (Int) async -> Void) -> some ApplicationProtocol {
        let router = Router()
        let state = self.state
        for path in ["/production/verifyReceipt", "/sandbox/verifyReceipt"] {
            router.post(RouterPath(path)) { _, _ -> Response in
                Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: await state.answer)))
            }
        }
        return Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0), serverName: "appstore-scripted"),
            onServerRunning: { await onServerRunning($0.localAddress?.port ?? 0) }, logger: logger
        )
    }
}

private actor ScriptedAnswer {
    private(set) var answer = Data(#"{"status":21002}"#.utf8)

    func set(_ answer: Data) {
        self.answer = answer
    }
}
