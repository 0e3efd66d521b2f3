import AsyncHTTPClient
import Crypto
import Foundation
import LedgerDomain
import NIOCore
import NIOHTTP1

/// A key for the App Store Server API, as App Store Connect issues it: its id, the team's issuer
/// id, and the P-256 private key (the `.p8` file, PEM).
public struct AppStoreServerAPIKey: Sendable, Hashable {
    public let keyID: String
    public let issuerID: String
    /// The private key as PEM (PKCS#8, as the `.p8` file holds it).
    public let privateKeyPEM: String

    /// Refuses a key that is not a P-256 private key, or ids that could not go in a token.
    public init(keyID: String, issuerID: String, privateKeyPEM: String) throws(AppStoreServerAPIError) {
        for (name, value) in [("key id", keyID), ("issuer id", issuerID)]
        where value.isEmpty || value.count > 100 || !value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) {
            throw .invalidKey("the \(name) '\(value.prefix(100))' is not an App Store Connect id (letters, digits and '-')")
        }
        guard (try? P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)) != nil else {
            throw .invalidKey("the private key is not a P-256 private key in PEM (the .p8 file App Store Connect gives)")
        }
        self.keyID = keyID
        self.issuerID = issuerID
        self.privateKeyPEM = privateKeyPEM
    }
}

/// Why a call to the App Store Server API did not give an answer.
public enum AppStoreServerAPIError: Error, Sendable, Hashable, CustomStringConvertible {
    case invalidKey(String)
    /// 401: the token was refused (wrong key, issuer or bundle id, or a revoked key).
    case unauthorized
    /// 404 for the transaction: Apple knows no such transaction in this environment.
    case transactionNotFound(String)
    /// 429: too many requests; Apple says when to come back (its `Retry-After`), or the ledger
    /// itself holds back until then after an earlier 429.
    case rateLimited(until: Date?)
    /// The service did not answer, or answered 5xx.
    case unavailable(String)
    /// An answer the ledger cannot read, or a signed transaction that did not verify.
    case malformed(String)
    /// Apple refused the request (a 4xx other than 401, 404 and 429), with its error code.
    case refused(status: Int, errorCode: Int64?, message: String)
    /// 404 for something other than a transaction (a test notification not sent yet, no notification URL).
    case notFound(String)

    public var description: String {
        switch self {
        case .invalidKey(let reason): "the App Store Server API key cannot be used: \(reason)"
        case .unauthorized: "the App Store Server API refused the token (401): check the key id, issuer id, private key and the app's bundle id"
        case .transactionNotFound(let id): "the App Store knows no transaction \(id) in this environment (404)"
        case .rateLimited(let until): "the App Store Server API asks to slow down (429)\(until.map { "; nothing is asked of it before \($0.formatted(.iso8601))" } ?? "")"
        case .unavailable(let reason): "the App Store Server API did not answer: \(reason)"
        case .malformed(let reason): "the App Store Server API's answer cannot be read: \(reason)"
        case .refused(let status, let code, let message):
            "the App Store Server API refused the request (HTTP \(status)\(code.map { ", error \($0)" } ?? "")): \(UntrustedText.quoted(message, limit: 200))"
        case .notFound(let what): what
        }
    }
}

/// A client of the App Store Server API: the one call the ledger makes, Get Transaction History
/// (`GET /inApps/v2/history/{transactionId}`), authenticated by a JWT (ES256) made with the app's
/// key, every page of it, each signed transaction verified as a device's would be.
///
/// One deadline (`timeout`) covers a whole history, every page's head and body: a slow answer
/// cannot hold its caller. Redirects are not followed (Apple's API answers where it is asked; a
/// redirect elsewhere would carry the bearer token there). After a 429 nothing is asked of the
/// API for that app and environment until Apple's `Retry-After` (a UNIX time in milliseconds).
public struct AppStoreServerAPI: Sendable {
    public static let appleProductionURL = "https://api.storekit.itunes.apple.com"
    public static let appleSandboxURL = "https://api.storekit-sandbox.itunes.apple.com"

    public struct Configuration: Sendable {
        public var productionURL: String
        public var sandboxURL: String
        public var timeout: Duration

            /// The deadline of one whole history: every page's request, head and body.
        public init(productionURL: String = AppStoreServerAPI.appleProductionURL, sandboxURL: String = AppStoreServerAPI.appleSandboxURL,
                    timeout: Duration = .seconds(30)) {
            self.productionURL = productionURL
            self.sandboxURL = sandboxURL
            self.timeout = timeout
        }

        /// `LEDGER_APPSTORE_SERVER_API_PRODUCTION_URL` and `…_SANDBOX_URL`, else Apple's.
        public static func fromEnvironment(_ variables: [String: String] = ProcessInfo.processInfo.environment) -> Self {
            Configuration(productionURL: variables["LEDGER_APPSTORE_SERVER_API_PRODUCTION_URL"] ?? AppStoreServerAPI.appleProductionURL,
                          sandboxURL: variables["LEDGER_APPSTORE_SERVER_API_SANDBOX_URL"] ?? AppStoreServerAPI.appleSandboxURL)
        }

        public func url(for environment: StoreEnvironment) -> String {
            environment == .production ? productionURL : sandboxURL
        }
    }

    public let configuration: Configuration
    let verifier: SignedPayloadVerifier
    let http: HTTPClient
    let gate: RateGate

    public init(configuration: Configuration = .init(), verifier: SignedPayloadVerifier, http: HTTPClient = AppStoreServerAPI.httpClient,
                gate: RateGate = .shared) {
        self.configuration = configuration
        self.verifier = verifier
        self.http = http
        self.gate = gate
    }

    /// The process's client for the API: redirects refused, a connect timeout of its own. Never
    /// shut down (it lives as long as the process, as `HTTPClient.shared` does).
    public static let httpClient: HTTPClient = {
        var configuration = HTTPClient.Configuration(redirectConfiguration: .disallow)
        configuration.timeout.connect = .seconds(5)
        return HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
    }()

    /// Whole histories, within one deadline: the fetch is cancelled when it passes.
    public func history(
        of transactionId: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey, now: Date = Date()
    ) async throws(AppStoreServerAPIError) -> [SignedTransaction] {
        try await withDeadline("the history") { () async throws(AppStoreServerAPIError) -> [SignedTransaction] in
            try await fetchHistory(of: transactionId, bundleId: bundleId, environment: environment, key: key, now: now)
        }
    }

    /// `work` within `configuration.timeout`: cancelled when it passes, and answered as unavailable.
    func withDeadline<T: Sendable>(
        _ what: String, _ work: @escaping @Sendable () async throws(AppStoreServerAPIError) -> T
    ) async throws(AppStoreServerAPIError) -> T {
        let deadline = configuration.timeout
        let result: Result<T, AppStoreServerAPIError> = await withTaskGroup(of: Result<T, AppStoreServerAPIError>?.self) { group in
            group.addTask {
                do throws(AppStoreServerAPIError) {
                    return .success(try await work())
                } catch {
                    return .failure(error)
                }
            }
            group.addTask {
                try? await Task.sleep(for: deadline)
                return Task.isCancelled ? nil : .failure(.unavailable("no whole answer within \(deadline) (\(what)'s deadline)"))
            }
            var outcome: Result<T, AppStoreServerAPIError> = .failure(.unavailable("cancelled"))
            for await finished in group {
                guard let finished else { continue }
                outcome = finished
                break
            }
            group.cancelAll()
            return outcome
        }
        return try result.get()
    }

    /// Every transaction of the customer who made `transactionId`, in the app, oldest first, each
    /// verified (Apple's chain, the bundle id, the environment).
    func fetchHistory(
        of transactionId: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey, now: Date
    ) async throws(AppStoreServerAPIError) -> [SignedTransaction] {
        try Self.checkIdentifier(transactionId, "transaction id")
        var transactions: [SignedTransaction] = []
        var revision: String?
        for _ in 0..<500 {
            var path = "/inApps/v2/history/\(transactionId)?sort=ASCENDING"
            if let revision {
                path += "&revision=" + (revision.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? revision)
            }
            let data = try await send(.GET, path, bundleId: bundleId, environment: environment, key: key, now: now,
                                      notFound: { _ in .transactionNotFound(transactionId) })
            let page: Page
            do { page = try JSONDecoder().decode(Page.self, from: data) } catch { throw .malformed("not a history response: \(error)") }
            for jws in page.signedTransactions ?? [] {
                do {
                    transactions.append(try await verifier.verify(jws, as: SignedTransaction.self, bundleId: bundleId, environment: environment))
                } catch {
                    throw .malformed("a signed transaction of the history did not verify: \(error.description)")
                }
            }
            guard page.hasMore == true, let next = page.revision, next != revision else { return transactions }
            revision = next
        }
        throw .malformed("the history did not end after 500 pages")
    }

    struct Page: Decodable {
        let revision: String?
        let hasMore: Bool?
        let bundleId: String?
        let environment: String?
        let signedTransactions: [String]?
    }

    /// An id Apple hands out (a transaction's, an order's, a test notification's token): letters,
    /// digits and dashes, so that it can go in a path as it is.
    static func checkIdentifier(_ id: String, _ what: String) throws(AppStoreServerAPIError) {
        guard !id.isEmpty, id.count <= 100, id.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }) else {
            throw .malformed("\(what) '\(id.prefix(80))' is not one the App Store hands out")
        }
    }

    /// One call: the body of a 2xx answer; every other answer as the error it is. `notFound`
    /// says what a 404 means for this call (Apple's `errorCode` given).
    func send(
        _ method: HTTPMethod, _ path: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey, now: Date = Date(),
        json: Data? = nil, notFound: (Int64?) -> AppStoreServerAPIError
    ) async throws(AppStoreServerAPIError) -> Data {
        let gateKey = "\(environment.rawValue) \(bundleId)"
        if let until = await gate.closed(gateKey) { throw .rateLimited(until: until) }
        var request = HTTPClientRequest(url: configuration.url(for: environment) + path)
        request.method = method
        request.headers.add(name: "Authorization", value: "Bearer \(try Self.token(key: key, bundleId: bundleId, now: now))")
        request.headers.add(name: "Accept", value: "application/json")
        if let json {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: json))
        }
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            // The caller's deadline covers this; the request's own is only a backstop.
            response = try await http.execute(request, timeout: TimeAmount.nanoseconds(Int64(configuration.timeout.components.seconds) * 1_000_000_000))
            body = try await response.body.collect(upTo: 4 << 20)
        } catch {
            if Task.isCancelled { throw .unavailable("cancelled at the call's deadline") }
            throw .unavailable(Self.describe(error))
        }
        let data = Data(body.readableBytesView)
        let errorCode = ((try? JSONSerialization.jsonObject(with: data)) as? [String: Any])?["errorCode"] as? Int64
        switch response.status.code {
        case 200...299: return data
        case 401: throw .unauthorized
        case 404: throw notFound(errorCode)
        case 429:
            let until = Self.retryAfter(response.headers.first(name: "Retry-After"), now: Date()) ?? Date().addingTimeInterval(60)
            await gate.close(gateKey, until: until)
            throw .rateLimited(until: until)
        case 300...399: throw .malformed("status \(response.status.code), a redirect, which the ledger does not follow (the token would go with it)")
        case 500...599: throw .unavailable("status \(response.status.code)\(errorCode.map { ", Apple's error \($0)" } ?? "")")
        default:
            throw .refused(status: Int(response.status.code), errorCode: errorCode,
                           message: String(decoding: data.prefix(300), as: UTF8.self))
        }
    }

    /// Apple's `Retry-After` on a 429: a UNIX time in milliseconds; delta-seconds (HTTP's own form)
    /// read too. Nil when it says neither; never more than a day ahead.
    static func retryAfter(_ text: String?, now: Date) -> Date? {
        guard let text, let number = Double(text.trimmingCharacters(in: .whitespaces)), number >= 0 else { return nil }
        let date = number > 100_000_000_000 ? Date(timeIntervalSince1970: number / 1_000) : now.addingTimeInterval(number)
        return min(max(date, now), now.addingTimeInterval(86_400))
    }

    static func describe(_ error: any Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .connectTimeout: return "no connection within the connect timeout"
            case .deadlineExceeded, .readTimeout: return "no answer in time"
            case .remoteConnectionClosed: return "the API closed the connection"
            default: return "\(error)"
            }
        }
        return "\(error)"
    }

    /// The bearer token: a JWT, ES256 with the key, for this bundle id, valid 20 minutes.
    public static func token(key: AppStoreServerAPIKey, bundleId: String, now: Date) throws(AppStoreServerAPIError) -> String {
        do {
            return try AppStoreConnectToken.sign(keyID: key.keyID, issuerID: key.issuerID, privateKeyPEM: key.privateKeyPEM, bundleId: bundleId, now: now)
        } catch {
            throw .invalidKey("signing the token failed: \(error)")
        }
    }
}

/// Where the App Store Server API said to slow down (429): nothing is asked of it for that app
/// and environment until the time it named. Shared by the process's clients.
public actor RateGate {
    public static let shared = RateGate()
    private var closedUntil: [String: Date] = [:]

    public init() {}

    /// When the gate opens again, if it is closed now.
    func closed(_ key: String, now: Date = Date()) -> Date? {
        guard let until = closedUntil[key] else { return nil }
        guard until > now else {
            closedUntil[key] = nil
            return nil
        }
        return until
    }

    func close(_ key: String, until: Date) {
        closedUntil[key] = max(until, closedUntil[key] ?? until)
    }
}
