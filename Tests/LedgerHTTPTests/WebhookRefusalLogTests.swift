import AppStore
import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import LedgerDomain
import LedgerHTTP
import LedgerTesting
import Logging
import NIOCore
import NIOFoundationEssentialsCompat
import Testing

/// What a refused stranger leaves in the operator's log: a line that says which check failed, with
/// the stranger's text escaped (no forged lines) and cut short, and no more than so many a minute.
@Suite struct WebhookRefusalLogTests {
    @Test func refusalsAreLoggedEscapedCutAndRateLimited() async throws {
        let log = CapturedLog()
        let ledger = InMemoryLedger(logger: quietLogger)
        ledger.directory.addApp(LedgerRoutesTests.app)
        let server = LedgerServer(configuration: .init(), services: ledger.services(verifier: CannedReceiptVerifier(answers: [:])),
                                  logger: log.logger(level: .info))
        let forged = "ES256\n2026-11-26T00:00:00+0000 critical ledger: all keys revoked" + String(repeating: "x", count: 20_000)
        let header = Base64URL.encode(try JSONSerialization.data(withJSONObject: ["alg": forged, "x5c": []]))
        let jws = header + "." + Base64URL.encode(Data("{}".utf8)) + "." + Base64URL.encode(Data([1]))
        try await Application(router: server.router(), logger: log.logger(level: .info)).test(.router) { client in
            for _ in 0..<40 {
                try await client.execute(
                    uri: "/v1/apps/\(LedgerRoutesTests.app)/notifications", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(data: try JSONSerialization.data(withJSONObject: ["signedPayload": jws]))
                ) { response in
                    #expect(response.status == .unauthorized)
                    #expect(!String(buffer: response.body).contains("critical"), "the answer does not echo the stranger's text")
                }
            }
        }
        let refusals = log.lines.filter { $0.message == "notification refused" }
        #expect((1...30).contains(refusals.count), "at most 30 a minute: \(refusals.count)")
        for line in refusals {
            #expect(!line.rendered.contains("\n"), "one line, however the stranger wrote it")
            #expect(line.rendered.utf8.count < 1_000, "cut short: \(line.rendered.utf8.count) bytes")
            #expect(line.metadata["ledger.check"] == "algorithm")
            #expect(line.metadata["ledger.error"]?.contains("ES256\\\\n2026") == true, "\(line.metadata)")
        }
    }
}
