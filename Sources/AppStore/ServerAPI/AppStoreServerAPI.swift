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
    /// 429: too many requests; Apple says when to come back.
    case rateLimited(retryAfterSeconds: Int?)
    /// The service did not answer, or answered 5xx.
    case unavailable(String)
    /// An answer the ledger cannot read, or a signed transaction that did not verify.
    case malformed(String)

    public var description: String {
        switch self {
        case .invalidKey(let reason): "the App Store Server API key cannot be used: \(reason)"
        case .unauthorized: "the App Store Server API refused the token (401): check the key id, issuer id, private key and the app's bundle id"
        case .transactionNotFound(let id): "the App Store knows no transaction \(id) in this environment (404)"
        case .rateLimited(let seconds): "the App Store Server API asks to slow down (429)\(seconds.map { "; try again in \($0) s" } ?? "")"
        case .unavailable(let reason): "the App Store Server API did not answer: \(reason)"
        case .malformed(let reason): "the App Store Server API's answer cannot be read: \(reason)"
        }
    }
}

/// A client of the App Store Server API: the one call the ledger makes, Get Transaction History
/// (`GET /inApps/v2/history/{transactionId}`), authenticated by a JWT (ES256) made with the app's
/// key, every page of it, each signed transaction verified as a device's would be.
public struct AppStoreServerAPI: Sendable {
    public static let appleProductionURL = "https://api.storekit.itunes.apple.com"
    public static let appleSandboxURL = "https://api.storekit-sandbox.itunes.apple.com"

    public struct Configuration: Sendable {
        public var productionURL: String
        public var sandboxURL: String
        public var timeout: Duration

        public init(productionURL: String = AppStoreServerAPI.appleProductionURL, sandboxURL: String = AppStoreServerAPI.appleSandboxURL,
                    timeout: Duration = .seconds(15)) {
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

    public init(configuration: Configuration = .init(), verifier: SignedPayloadVerifier, http: HTTPClient = .shared) {
        self.configuration = configuration
        self.verifier = verifier
        self.http = http
    }

    /// Every transaction of the customer who made `transactionId`, in the app, oldest first, each
    /// verified (Apple's chain, the bundle id, the environment).
    public func history(
        of transactionId: String, bundleId: String, environment: StoreEnvironment, key: AppStoreServerAPIKey, now: Date = Date()
    ) async throws(AppStoreServerAPIError) -> [SignedTransaction] {
        guard !transactionId.isEmpty, transactionId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw .malformed("transaction id '\(transactionId.prefix(80))' is not an App Store transaction id")
        }
        var transactions: [SignedTransaction] = []
        var revision: String?
        for _ in 0..<500 {
            var url = "\(configuration.url(for: environment))/inApps/v2/history/\(transactionId)?sort=ASCENDING"
            if let revision {
                url += "&revision=" + (revision.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? revision)
            }
            let page = try await get(url, token: try Self.token(key: key, bundleId: bundleId, now: now), transactionId: transactionId)
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

    private func get(_ url: String, token: String, transactionId: String) async throws(AppStoreServerAPIError) -> Page {
        var request = HTTPClientRequest(url: url)
        request.method = .GET
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: "application/json")
        let response: HTTPClientResponse
        let body: ByteBuffer
        do {
            response = try await http.execute(request, timeout: .nanoseconds(Int64(configuration.timeout.components.seconds * 1_000_000_000)))
            body = try await response.body.collect(upTo: 4 << 20)
        } catch {
            throw .unavailable("\(error)")
        }
        switch response.status.code {
        case 200:
            do {
                return try JSONDecoder().decode(Page.self, from: Data(body.readableBytesView))
            } catch {
                throw .malformed("not a history response: \(error)")
            }
        case 401: throw .unauthorized
        case 404: throw .transactionNotFound(transactionId)
        case 429: throw .rateLimited(retryAfterSeconds: response.headers.first(name: "Retry-After").flatMap { Int($0) })
        case 500...599: throw .unavailable("status \(response.status.code)")
        default: throw .malformed("status \(response.status.code): \(String(decoding: body.readableBytesView.prefix(300), as: UTF8.self))")
        }
    }

    /// The bearer token: a JWT, ES256 with the key, for this bundle id, valid 20 minutes.
    public static func token(key: AppStoreServerAPIKey, bundleId: String, now: Date) throws(AppStoreServerAPIError) -> String {
        let issuedAt = Int64(now.timeIntervalSince1970)
        let header: [String: Any] = ["alg": "ES256", "kid": key.keyID, "typ": "JWT"]
        let claims: [String: Any] = ["iss": key.issuerID, "iat": issuedAt, "exp": issuedAt + 1200, "aud": "appstoreconnect-v1", "bid": bundleId]
        do {
            let input = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) + "."
                + Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
            let privateKey = try P256.Signing.PrivateKey(pemRepresentation: key.privateKeyPEM)
            let signature = try privateKey.signature(for: Data(input.utf8))
            return input + "." + Base64URL.encode(signature.rawRepresentation)
        } catch {
            throw .invalidKey("signing the token failed: \(error)")
        }
    }
}
