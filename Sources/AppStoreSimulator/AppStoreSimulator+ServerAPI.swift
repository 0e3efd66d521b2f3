import AppStore
import Crypto
import Foundation
import Hummingbird
import LedgerDomain

/// The App Store Server API's Get Transaction History, as Apple serves it for the simulator's
/// environment, and the admin route that makes the API keys its tokens are signed with.
extension AppStoreSimulator {
    struct APIKeyView: Codable { var keyId: String; var issuerId: String; var privateKey: String }
    struct HistoryView: Encodable {
        var revision: String
        var hasMore: Bool
        var bundleId: String
        var appAppleId: Int64
        var environment: String
        var signedTransactions: [String]
    }

    /// Transactions per history page, as Apple sends.
    static let historyPageSize = 20

    func addServerAPIRoutes(to router: Router<some RequestContext>) {
        let store = self.store
        let signedPayloads = self.signedPayloads
        let environment = configuration.environment

        // A new key; or, with a body, a key made elsewhere (Apple's keys are the team's, good in
        // both environments: a production simulator takes the sandbox one's).
        router.post("admin/apps/:bundleId/api-keys") { request, context -> Response in
            let bundleId = try context.parameters.require("bundleId")
            if let given = try await Self.decode(APIKeyView.self, request, context, allowEmpty: true) {
                try await store.addAPIKey(bundleId: bundleId, keyID: given.keyId, issuerID: given.issuerId, privateKeyPEM: given.privateKey)
                return try Self.json(given, status: .created)
            }
            let made = try await store.createAPIKey(bundleId: bundleId)
            return try Self.json(APIKeyView(keyId: made.keyID, issuerId: made.issuerID, privateKey: made.privateKeyPEM), status: .created)
        }
        // `/inApps/…` is this simulator's own App Store; `/production/inApps/…` and `/sandbox/inApps/…`
        // stand for Apple's two hosts, so one simulator can sit behind both of the ledger's URLs:
        // the other environment knows none of its transactions (404).
        for (prefix, asked) in [("", environment), ("production/", .production), ("sandbox/", .sandbox)] as [(String, StoreEnvironment)] {
            router.get(RouterPath(prefix + "inApps/v2/history/:transactionId")) { request, context -> Response in
                let transactionId = try context.parameters.require("transactionId")
                guard let bundleId = await Self.authenticate(request, store: store) else {
                    return Response(status: .unauthorized)
                }
                guard asked == environment, let history = await store.history(of: transactionId, bundleId: bundleId) else {
                    return try Self.json(["errorCode": "4040010", "errorMessage": "Transaction id not found."], status: .notFound)
                }
                let start = request.uri.queryParameters.get("revision").flatMap { Int($0) } ?? 0
                let page = history.dropFirst(start).prefix(Self.historyPageSize)
                let now = await store.now
                var signed: [String] = []
                for transaction in page {
                    let product = await store.product(bundleId: bundleId, productId: transaction.productId)
                    signed.append(try signedPayloads.sign(signedPayloads.fields(of: transaction, product: product, environment: environment, signedDate: Date())))
                }
                let next = start + page.count
                return try Self.json(HistoryView(
                    revision: String(next), hasMore: next < history.count, bundleId: bundleId,
                    appAppleId: Int64(SimulatorResponseRenderer.stableNumber(bundleId) % 10_000_000_000),
                    environment: environment.responseValue, signedTransactions: signed
                ))
            }
        }
    }

    /// The bundle id of a valid bearer token: by one of the app's keys (`verifiedClaims`), valid
    /// for at most an hour.
    static func authenticate(_ request: Request, store: SimulatorStore) async -> String? {
        let claims = await verifiedClaims(request, longest: 3600) { keyID, claims in
            guard let bundleId = claims["bid"] as? String else { return nil }
            return await store.apiKey(bundleId: bundleId, keyID: keyID)
        }
        return claims?["bid"] as? String
    }

    /// The claims of a valid bearer token: ES256 by the key `key` finds for its `kid` (and claims),
    /// that key's issuer, audience `appstoreconnect-v1`, issued at most a minute ahead and valid
    /// now, for at most `longest` seconds; nil for anything else.
    static func verifiedClaims(
        _ request: Request, longest: Int64,
        key: (String, [String: Any]) async -> (issuerID: String, publicKey: Data)?
    ) async -> [String: Any]? {
        guard let header = request.headers[.authorization], header.hasPrefix("Bearer ") else { return nil }
        let parts = header.dropFirst("Bearer ".count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerData = Base64URL.decode(parts[0]), let claimsData = Base64URL.decode(parts[1]),
              let signature = Base64URL.decode(parts[2]),
              let jose = (try? JSONSerialization.jsonObject(with: headerData)) as? [String: Any],
              let claims = (try? JSONSerialization.jsonObject(with: claimsData)) as? [String: Any],
              jose["alg"] as? String == "ES256", let keyID = jose["kid"] as? String, let issuer = claims["iss"] as? String,
              claims["aud"] as? String == "appstoreconnect-v1",
              let issuedAt = (claims["iat"] as? NSNumber)?.int64Value, let expires = (claims["exp"] as? NSNumber)?.int64Value,
              let found = await key(keyID, claims), found.issuerID == issuer,
              let publicKey = try? P256.Signing.PublicKey(x963Representation: found.publicKey),
              let ecdsa = try? P256.Signing.ECDSASignature(rawRepresentation: signature),
              publicKey.isValidSignature(ecdsa, for: Data("\(parts[0]).\(parts[1])".utf8))
        else { return nil }
        let now = Int64(Date().timeIntervalSince1970)
        guard issuedAt <= now + 60, expires > now, expires - issuedAt <= longest else { return nil }
        return claims
    }
}
