import AsyncHTTPClient
import Crypto
import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import Metrics
import NIOCore
import NIOHTTP1

/// `ReceiptVerifier` over the App Store's `verifyReceipt` JSON endpoints.
///
/// Production is asked first (unless the request says otherwise); 21007 sends the receipt to the
/// sandbox and 21008 to production, once: a second redirect means the URLs are misconfigured.
/// 21005, retryable 21100–21199, non-200 HTTP answers, timeouts and connection errors are retried
/// with `configuration.retry`, then reported as `unavailable`. Every other non-zero status except
/// 21006 is `invalidReceipt`. The request body, which carries the shared secret, is never logged.
public struct AppStoreReceiptVerifier: ReceiptVerifier {
    let configuration: AppStoreConfiguration
    let httpClient: HTTPClient
    let metrics = AppStoreMetrics()

    /// - Parameter httpClient: owned by the caller, who shuts it down; `.shared` needs no shutdown.
    /// An HTTP client suited to `verifyReceipt`: a short connect timeout, so that an App Store that
    /// cannot be reached is reported (503) within seconds rather than after the whole request
    /// timeout per attempt, and enough connections for concurrent ingestion. The caller shuts it down.
    public static func makeHTTPClient(connectTimeout: Duration = .seconds(2), connectionsPerHost: Int = 64) -> HTTPClient {
        var configuration = HTTPClient.Configuration()
        configuration.timeout.connect = timeAmount(connectTimeout)
        configuration.connectionPool.concurrentHTTP1ConnectionsPerHostSoftLimit = connectionsPerHost
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }

    public init(configuration: AppStoreConfiguration = .init(), httpClient: HTTPClient = .shared) {
        self.configuration = configuration
        self.httpClient = httpClient
    }

    public func verify(_ request: ReceiptVerificationRequest, logger: Logger) async throws -> VerifiedReceipt {
        let sha256 = Self.sha256Hex(request.receiptData)
        var logger = logger
        logger[metadataKey: "appstore.receipt.sha256"] = "\(sha256)"
        let body = Self.requestBody(request)
        var environment = request.firstEnvironment
        var redirected = false
        while true {
            let (root, status, answer) = try await exchange(body, environment: environment, logger: logger)
            switch status.handling(isRetryable: ReceiptStatus.isRetryableFlag(in: root)) {
            case .valid, .validButExpired:
                let receipt = try ReceiptResponseParser(receiptSHA256: sha256, answeredBy: environment).parse(root, status: status, answer: answer)
                logger.debug("receipt verified", metadata: [
                    "appstore.environment": "\(receipt.environment)",
                    "appstore.status": "\(status.code)",
                    "appstore.transactions": "\(receipt.transactions.count)",
                ])
                return receipt
            case .retryInSandbox where environment == .production && !redirected:
                logger.debug("sandbox receipt sent to production, asking the sandbox", metadata: ["appstore.status": "\(status.code)"])
                environment = .sandbox
                redirected = true
            case .retryInProduction where environment == .sandbox && !redirected:
                logger.debug("production receipt sent to the sandbox, asking production", metadata: ["appstore.status": "\(status.code)"])
                environment = .production
                redirected = true
            case .retryLater:
                // `exchange` only returns a retryable status once its attempts are spent.
                throw ReceiptVerificationError.unavailable(
                    "the \(environment) App Store answered \(status.code) (\(status.meaning)) \(configuration.retry.maximumAttempts) times",
                    status: status
                )
            case .retryInSandbox, .retryInProduction, .invalid:
                logger.debug("receipt refused", metadata: ["appstore.environment": "\(environment)", "appstore.status": "\(status.code)"])
                throw ReceiptVerificationError.invalidReceipt(status, environment: environment)
            }
        }
    }

    /// One logical request to one environment: retried while the answer says "later", returning the
    /// first answer that is not, or the last one.
    private func exchange(
        _ body: ByteBuffer,
        environment: StoreEnvironment,
        logger: Logger
    ) async throws -> (LenientJSON, ReceiptStatus, Data) {
        let url = configuration.url(for: environment)
        let policy = configuration.retry
        var attempt = 1
        while true {
            let outcome: Result<(LenientJSON, ReceiptStatus, Data), ReceiptVerificationError>
            do {
                outcome = .success(try await post(body, to: url, environment: environment))
            } catch let error as ReceiptVerificationError where error.code == .unavailable {
                outcome = .failure(error)
            }
            switch outcome {
            case .success(let (root, status, answer)):
                let retryable = status.handling(isRetryable: ReceiptStatus.isRetryableFlag(in: root)) == .retryLater
                if !retryable || attempt >= policy.maximumAttempts { return (root, status, answer) }
            case .failure(let error):
                if attempt >= policy.maximumAttempts { throw error }
            }
            let delay = policy.delay(afterAttempt: attempt)
            logger.debug("App Store unavailable, retrying", metadata: [
                "appstore.environment": "\(environment)",
                "appstore.attempt": "\(attempt)",
                "appstore.retry_in_ms": "\(Int(RetryPolicy.seconds(delay) * 1000))",
                "appstore.outcome": "\(Self.summary(outcome))",
            ])
            try await Task.sleep(for: delay)
            attempt += 1
        }
    }

    /// One HTTP exchange. Transport failures and non-200 answers become `unavailable`; a 200 whose body
    /// is not a `verifyReceipt` answer becomes `malformedResponse`.
    private func post(_ body: ByteBuffer, to url: String, environment: StoreEnvironment) async throws -> (LenientJSON, ReceiptStatus, Data) {
        let start = ContinuousClock.now
        do {
            let answer = try await postUnmeasured(body, to: url, environment: environment)
            metrics.record(.receiptStatus(answer.1.code), environment: environment, duration: ContinuousClock.now - start)
            return answer
        } catch let failure as HTTPExchangeFailure {
            metrics.record(failure.outcome, environment: environment, duration: ContinuousClock.now - start)
            throw failure.error
        }
    }

    /// A failed exchange: the error to report and how the metrics name it.
    private struct HTTPExchangeFailure: Error {
        let error: ReceiptVerificationError
        let outcome: AppStoreMetrics.Outcome
    }

    /// `post` without its metrics; every failure except cancellation is an `HTTPExchangeFailure`.
    private func postUnmeasured(_ body: ByteBuffer, to url: String, environment: StoreEnvironment) async throws -> (LenientJSON, ReceiptStatus, Data) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "Accept", value: "application/json")
        request.body = .bytes(body)
        // Shown in messages (which reach API callers) without any password the URL may carry.
        let shownURL = URLRedaction.masked(url)
        let bytes: ByteBuffer
        let httpStatus: HTTPResponseStatus
        do {
            // AsyncHTTPClient's deadline covers connecting and the answer's head (and names what
            // failed); the body is read within what is left of the same time.
            let deadline = ContinuousClock.now + configuration.timeout
            let response = try await httpClient.execute(request, timeout: Self.timeAmount(configuration.timeout))
            httpStatus = response.status
            bytes = try await Self.withDeadline(deadline) { [maximum = configuration.maximumResponseBytes] in
                try await response.body.collect(upTo: maximum)
            }
        } catch let error as CancellationError {
            throw error
        } catch let error as NIOTooManyBytesError {
            throw HTTPExchangeFailure(
                error: .malformedResponse("the answer from \(shownURL) is larger than \(configuration.maximumResponseBytes) bytes (\(error))"),
                outcome: .malformedResponse
            )
        } catch {
            let reason = Self.isTimeout(error)
                ? "timed out: no whole answer within \(Int(configuration.timeout / .milliseconds(1))) ms"
                : String(describing: error)
            throw HTTPExchangeFailure(
                error: .unavailable("the \(environment) App Store at \(shownURL) did not answer (\(reason))"),
                outcome: Self.isTimeout(error) ? .timeout : .connectionError
            )
        }
        guard httpStatus == .ok else {
            throw HTTPExchangeFailure(
                error: .unavailable("the \(environment) App Store at \(shownURL) answered HTTP \(httpStatus.code)"),
                outcome: .http(Int(httpStatus.code))
            )
        }
        let answer = Data(bytes.readableBytesView)
        do throws(ReceiptVerificationError) {
            let (root, status) = try ReceiptResponseParser.root(of: answer, from: shownURL)
            return (root, status, answer)
        } catch {
            throw HTTPExchangeFailure(error: error, outcome: .malformedResponse)
        }
    }

    // MARK: Helpers

    /// verifyReceipt's request: `receipt-data`, the app's `password` when it has a shared secret,
    /// `exclude-old-transactions` when asked. Written directly: JSONSerialization spent more on
    /// this small object than the rest of the request's JSON (a receipt's body is built for each
    /// environment it is sent to).
    static func requestBody(_ request: ReceiptVerificationRequest) -> ByteBuffer {
        var json = #"{"receipt-data":"#
        json.reserveCapacity(request.receiptData.utf8.count + 128)
        LedgerJSON.appendQuoted(request.receiptData, to: &json)
        if let secret = request.sharedSecret {
            json += #","password":"#
            LedgerJSON.appendQuoted(secret.value, to: &json)
        }
        if request.excludeOldTransactions { json += #","exclude-old-transactions":true"# }
        json += "}"
        return ByteBuffer(string: json)
    }

    /// Lower-case hex SHA-256 of the receipt text's UTF-8 bytes.
    public static func sha256Hex(_ receiptData: String) -> String {
        ContentHash.sha256Hex(receiptData)
    }

    public static func sha256Hex(_ data: Data) -> String {
        ContentHash.sha256Hex(data)
    }

    static func timeAmount(_ duration: Duration) -> TimeAmount {
        let (seconds, attoseconds) = duration.components
        return .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }

    /// Runs `operation` (reading an answer's body) until `deadline`. AsyncHTTPClient's own
    /// deadline ends when the answer's head arrives: a body that trickles in would otherwise hold
    /// the exchange (and the request waiting on it) open for as long as it trickles. Past the
    /// deadline the read is cancelled, which closes its connection, and
    /// `HTTPClientError.deadlineExceeded` is thrown.
    static func withDeadline<Value: Sendable>(
        _ deadline: ContinuousClock.Instant, _ operation: @escaping @Sendable () async throws -> Value
    ) async throws -> Value {
        try await withThrowingTaskGroup(of: Value?.self) { group in
            group.addTask { try await operation() }
            group.addTask {
                try await Task.sleep(until: deadline, clock: .continuous)
                return nil
            }
            defer { group.cancelAll() }
            // nil: the deadline came first, whatever part of the answer had arrived.
            guard let first = try await group.next(), let value = first else { throw HTTPClientError.deadlineExceeded }
            return value
        }
    }

    private static func isTimeout(_ error: any Error) -> Bool {
        guard let error = error as? HTTPClientError else { return false }
        return error == .deadlineExceeded || error == .readTimeout || error == .connectTimeout
    }

    private static func summary(_ outcome: Result<(LenientJSON, ReceiptStatus, Data), ReceiptVerificationError>) -> String {
        switch outcome {
        case .success(let (_, status, _)): "status \(status.code)"
        case .failure(let error): error.message
        }
    }
}
