@testable import AppStore
import Foundation
import NIOCore
import LedgerDomain
import LedgerTesting
import Testing

/// Every status path of the client, over real HTTP against a local server answering canned bodies.
@Suite struct AppStoreReceiptVerifierTests {
    static let validAnswer = #"""
        {"status":0,"environment":"Production","receipt":{"bundle_id":"com.example.app","receipt_type":"Production",
         "in_app":[{"quantity":"2","product_id":"coins","transaction_id":"1001","original_transaction_id":"1001",
                    "purchase_date":"2013-01-01 00:00:00 Etc/GMT","purchase_date_ms":"1356998400000"}]}}
        """#
    static let sandboxAnswer = validAnswer.replacingOccurrences(of: #""environment":"Production""#, with: #""environment":"Sandbox""#)

    let request = ReceiptVerificationRequest(receiptData: "bXktcmVjZWlwdA==", sharedSecret: SharedSecret("s3cr3t-value"), excludeOldTransactions: true)

    @Test("the request body is JSON that reads back to what was given, whatever the characters; without a secret or the flag, neither key")
    func requestBodyReadsBack() throws {
        let odd = ReceiptVerificationRequest(receiptData: "ab+/=\"\\\n\u{1}é", sharedSecret: SharedSecret("q\"uote\\\t"), excludeOldTransactions: true)
        let body = AppStoreReceiptVerifier.requestBody(odd)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any])
        #expect(object["receipt-data"] as? String == "ab+/=\"\\\n\u{1}é")
        #expect(object["password"] as? String == "q\"uote\\\t")
        #expect(object["exclude-old-transactions"] as? Bool == true)
        let plain = AppStoreReceiptVerifier.requestBody(ReceiptVerificationRequest(receiptData: "abc"))
        #expect(String(buffer: plain) == #"{"receipt-data":"abc"}"#)
    }

    @Test func validReceiptIsParsedAndTheRequestCarriesTheProtocolKeys() async throws {
        let store = CannedAppStore([.production: [.json(Self.validAnswer)]])
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.environment == .production)
        #expect(receipt.transactions.map(\.quantity) == [2])
        #expect(receipt.receiptSHA256 == AppStoreReceiptVerifier.sha256Hex("bXktcmVjZWlwdA=="))
        #expect(receipt.receiptSHA256.count == 64)
        let sent = try #require(store.received.first).json
        #expect(sent["receipt-data"] as? String == "bXktcmVjZWlwdA==")
        #expect(sent["password"] as? String == "s3cr3t-value")
        #expect(sent["exclude-old-transactions"] as? Bool == true)
        #expect(store.count(.sandbox) == 0)
    }

    @Test func passwordAndExclusionAreLeftOutWhenNotGiven() async throws {
        let store = CannedAppStore([.production: [.json(Self.validAnswer)]])
        _ = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration)
                .verify(ReceiptVerificationRequest(receiptData: "abc"), logger: quietLogger)
        }
        let sent = try #require(store.received.first).json
        #expect(Set(sent.keys) == ["receipt-data"])
    }

    @Test func sandboxReceiptSentToProductionIsRetriedInTheSandbox() async throws {
        let store = CannedAppStore([.production: [.status(21007)], .sandbox: [.json(Self.sandboxAnswer)]])
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.environment == .sandbox)
        #expect(store.received.map(\.environment) == [.production, .sandbox])
        #expect(store.received.last?.json["password"] as? String == "s3cr3t-value", "the sandbox gets the same request")
    }

    @Test func productionReceiptSentToTheSandboxIsRetriedInProduction() async throws {
        let store = CannedAppStore([.sandbox: [.status(21008)], .production: [.json(Self.validAnswer)]])
        var sandboxFirst = request
        sandboxFirst.firstEnvironment = .sandbox
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(sandboxFirst, logger: quietLogger)
        }
        #expect(receipt.environment == .production)
        #expect(store.received.map(\.environment) == [.sandbox, .production])
    }

    @Test func productionAnswerFromTheSandboxURLGoesBackToProductionOnlyOnce() async throws {
        // Production says "sandbox", the sandbox says "production": misconfigured URLs, not a loop.
        let store = CannedAppStore([.production: [.status(21007)], .sandbox: [.status(21008)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .invalidReceipt)
        #expect(error.status?.code == 21008)
        #expect(error.message.contains("URLs"))
        #expect(store.received.map(\.environment) == [.production, .sandbox])
    }

    @Test func serverUnavailableIsRetriedAndThenSucceeds() async throws {
        let store = CannedAppStore([.production: [.status(21005), .status(21005), .json(Self.validAnswer)]])
        let receipt = try await store.run(maximumAttempts: 3) { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.transactions.count == 1)
        #expect(store.count(.production) == 3)
    }

    @Test func serverUnavailableThroughEveryAttemptIsReportedUnavailable() async throws {
        let store = CannedAppStore([.production: [.status(21005)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 4) { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.isRetryable)
        #expect(error.status?.code == 21005)
        #expect(error.message.hasPrefix("App Store unavailable"))
        #expect(store.count(.production) == 4)
    }

    @Test(arguments: [21100, 21150, 21199])
    func retryableInternalErrorsAreRetried(status: Int) async throws {
        let store = CannedAppStore([.production: [.status(status, isRetryable: true), .json(Self.validAnswer)]])
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.transactions.count == 1)
        #expect(store.count(.production) == 2)
    }

    @Test func retryableInternalErrorThroughEveryAttemptIsUnavailable() async throws {
        let store = CannedAppStore([.production: [.json(#"{"status":21102,"is-retryable":"true"}"#)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 2) { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.status?.code == 21102)
        #expect(store.count(.production) == 2)
    }

    /// Apple's answers spell the flag `is_retryable`; older ones `is-retryable`. Either, as a JSON
    /// boolean, a number or a string, makes an internal data access error retried.
    @Test(arguments: [#""is_retryable":true"#, #""is_retryable":1"#, #""is_retryable":"true""#, #""is-retryable":true"#])
    func bothSpellingsOfTheRetryableFlagAreRead(flag: String) async throws {
        let store = CannedAppStore([.production: [.json("{\"status\":21150,\(flag)}"), .json(Self.validAnswer)]])
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.transactions.count == 1)
        #expect(store.count(.production) == 2)
    }

    /// 21009 (internal data access error) and 21005 (server unavailable) are the App Store's own
    /// trouble, never the receipt's: retried with backoff, then unavailable (a 503 to retry), never refused.
    @Test(arguments: [21009, 21005])
    func internalTroubleIsRetriedThenUnavailable(status: Int) async throws {
        let store = CannedAppStore([.production: [.status(status)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 3) { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.isRetryable)
        #expect(store.count(.production) == 3)
    }

    @Test func internalErrorNotMarkedRetryableIsRefusedAtOnce() async throws {
        let store = CannedAppStore([.production: [.status(21101, isRetryable: false)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .invalidReceipt)
        #expect(error.status?.code == 21101)
        #expect(store.count(.production) == 1)
    }

    @Test(arguments: [21000, 21002, 21003, 21004, 21010, 21999])
    func refusalsNameTheStatusAndItsMeaningWithoutRetrying(status: Int) async throws {
        let store = CannedAppStore([.production: [.status(status)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .invalidReceipt)
        #expect(error.isRetryable == false)
        #expect(error.status?.code == status)
        #expect(error.message.contains("\(status)"))
        #expect(error.message.contains(ReceiptStatus(code: status).meaning))
        #expect(!error.message.contains("s3cr3t-value"))
        #expect(store.count(.production) == 1)
    }

    @Test func sharedSecretMismatchPointsAtTheConfiguration() async throws {
        let store = CannedAppStore([.production: [.status(21004)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.message.contains("shared secret"))
        #expect(!"\(error)".contains("s3cr3t-value"))
    }

    @Test func expiredOldStyleSubscriptionIsValidWithItsContent() async throws {
        let store = CannedAppStore([.production: [.json(try fixture("old_style_auto_renewable_expired"))]])
        let receipt = try await store.run { configuration in
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(receipt.status.code == 21006)
        #expect(receipt.environment == .production)
        #expect(receipt.transactions.count == 2)
    }

    @Test func httpErrorsCountAsUnavailable() async throws {
        let store = CannedAppStore([.production: [.http(503)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 2) { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.message.contains("HTTP 503"))
        #expect(store.count(.production) == 2)
    }

    @Test func timeoutsCountAsUnavailable() async throws {
        let store = CannedAppStore([.production: [.slow(milliseconds: 3_000, Self.validAnswer)]])
        let started = ContinuousClock.now
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 2, timeout: .milliseconds(300)) { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.message.contains("timed out"))
        // Both attempts waited out their timeout: a lower bound, which a loaded machine cannot break
        // (counting the server's hits could: the second request may time out before it is read).
        #expect(ContinuousClock.now - started >= .milliseconds(600))
        #expect(store.count(.production) >= 1)
    }

    @Test func anAnswerWhoseBodyTricklesPastTheDeadlineTimesOut() async throws {
        // The head comes at once; the body would take 10 s. The deadline covers the body too.
        let store = CannedAppStore([.production: [.trickle(milliseconds: 10_000, Self.validAnswer)]])
        let took = Elapsed()
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run(maximumAttempts: 1, timeout: .milliseconds(400)) { configuration in
                let started = ContinuousClock.now
                defer { took.record(started.duration(to: .now)) }
                return try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .unavailable)
        #expect(error.isRetryable)
        #expect(error.message.contains("timed out"))
        // Cut off by the deadline, not by the end of the trickle (a generous bound for a loaded
        // machine; the canned store's own shutdown, which waits for the trickle, is not counted).
        #expect(took.duration < .seconds(8))
        #expect(store.count(.production) == 1)
    }

    @Test func appStoreURLsAreShownWithoutTheirPassword() async throws {
        // Nothing listens on the discard port: the message names the URL, never its password.
        let configuration = AppStoreConfiguration(
            productionURL: "http://operator:hunter2@127.0.0.1:9/verifyReceipt",
            sandboxURL: "http://operator:hunter2@127.0.0.1:9/verifyReceipt",
            timeout: .milliseconds(500),
            retry: RetryPolicy(maximumAttempts: 1, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
        )
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(error.message.contains("http://operator:****@127.0.0.1:9/verifyReceipt"))
        #expect(!error.message.contains("hunter2"))
    }

    @Test func connectionRefusedCountsAsUnavailable() async throws {
        // Nothing listens on the discard port on loopback.
        let configuration = AppStoreConfiguration(
            productionURL: "http://127.0.0.1:9/verifyReceipt",
            sandboxURL: "http://127.0.0.1:9/verifyReceipt",
            timeout: .milliseconds(500),
            retry: RetryPolicy(maximumAttempts: 2, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2))
        )
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
        }
        #expect(error.code == .unavailable)
        #expect(error.message.contains("did not answer"))
    }

    @Test(arguments: [
        "<html>busy</html>",
        #"{"receipt":{}}"#,
        #"{"status":0}"#,
        #"{"status":0,"receipt":{"in_app":[]}}"#,
    ])
    func unreadableAnswersAreMalformed(body: String) async throws {
        let store = CannedAppStore([.production: [.json(body)]])
        let error = try await #require(throws: ReceiptVerificationError.self) {
            try await store.run { configuration in
                try await AppStoreReceiptVerifier(configuration: configuration).verify(request, logger: quietLogger)
            }
        }
        #expect(error.code == .malformedResponse)
        #expect(store.count(.production) == 1)
    }

    @Test func theSharedSecretNeverAppearsInDescriptions() {
        let secret = SharedSecret("s3cr3t-value")
        #expect(!"\(secret)".contains("s3cr3t"))
        #expect(!String(reflecting: secret).contains("s3cr3t"))
        var dumped = ""
        dump(request, to: &dumped)
        #expect(!dumped.contains("s3cr3t"))
        #expect(!"\(request)".contains("s3cr3t"))
        #expect(secret.value == "s3cr3t-value")
    }
}

/// A duration measured inside a closure that cannot write to its caller's variables.
final class Elapsed: @unchecked Sendable {
    private let lock = NSLock()
    private var measured = Duration.zero

    func record(_ duration: Duration) { lock.withLock { measured = duration } }
    var duration: Duration { lock.withLock { measured } }
}
