import AppStore
import Foundation
import Hummingbird
import HummingbirdTesting
import LedgerDomain
import LedgerHTTP
import Logging
import LedgerTesting
import Testing

@Suite("App Store metrics")
struct AppStoreMetricsTests {
    /// A local `verifyReceipt` that sends every production receipt to the sandbox (21007) and has
    /// a sandbox that answers HTTP 500: two environments, a receipt status and an HTTP status.
    func cannedAppStore() -> some ApplicationProtocol {
        let router = Router()
        router.post("/production/verifyReceipt") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "application/json"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: #"{"status":21007}"#)))
        }
        router.post("/sandbox/verifyReceipt") { _, _ -> Response in Response(status: .internalServerError) }
        return Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
    }

    @Test("each HTTP exchange with the App Store is counted by environment and outcome, and timed")
    func countsExchanges() async throws {
        LedgerMetrics.bootstrap()
        try await cannedAppStore().test(.live) { client in
            let base = "http://127.0.0.1:\(try #require(client.port))"
            let verifier = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
                productionURL: base + "/production/verifyReceipt",
                sandboxURL: base + "/sandbox/verifyReceipt",
                timeout: .seconds(5),
                retry: RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
            ))
            let before = PrometheusSamples.current()
            await #expect(throws: ReceiptVerificationError.self) {
                try await verifier.verify(ReceiptVerificationRequest(receiptData: "cmVjZWlwdA=="), logger: Logger(label: "test"))
            }
            let after = PrometheusSamples.current()
            let requests = "ledger_appstore_requests_total"
            #expect(after.increase(requests, ["environment": "production", "status": "21007"], since: before) >= 1)
            #expect(after.increase(requests, ["environment": "sandbox", "status": "http_500"], since: before) >= 2)
            #expect(after.increase("ledger_appstore_request_duration_seconds_count", ["environment": "sandbox"], since: before) >= 2)
        }
    }

    @Test("an App Store that cannot be reached counts as connection_error")
    func countsConnectionErrors() async throws {
        LedgerMetrics.bootstrap()
        // Port 1 on loopback: nothing listens, the connection is refused at once.
        let verifier = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
            productionURL: "http://127.0.0.1:1/verifyReceipt",
            sandboxURL: "http://127.0.0.1:1/verifyReceipt",
            timeout: .seconds(5),
            retry: RetryPolicy(maximumAttempts: 1, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(1))
        ))
        let before = PrometheusSamples.current()
        await #expect(throws: ReceiptVerificationError.self) {
            try await verifier.verify(ReceiptVerificationRequest(receiptData: "cmVjZWlwdA=="), logger: Logger(label: "test"))
        }
        let after = PrometheusSamples.current()
        #expect(after.increase("ledger_appstore_requests_total", ["environment": "production", "status": "connection_error"], since: before) >= 1)
    }
}
