import Crypto
import Foundation
import LedgerDomain

/// The bearer token both of Apple's APIs take: ES256 by an API key (`kid`), the team's issuer,
/// audience `appstoreconnect-v1`, valid 20 minutes; the App Store Server API also wants the app's
/// bundle id (`bid`), App Store Connect's sales reports none.
enum AppStoreConnectToken {
    static func sign(keyID: String, issuerID: String, privateKeyPEM: String, bundleId: String?, now: Date) throws -> String {
        let issuedAt = Int64(now.timeIntervalSince1970)
        let header: [String: Any] = ["alg": "ES256", "kid": keyID, "typ": "JWT"]
        var claims: [String: Any] = ["iss": issuerID, "iat": issuedAt, "exp": issuedAt + 1200, "aud": "appstoreconnect-v1"]
        if let bundleId { claims["bid"] = bundleId }
        let input = Base64URL.encode(try JSONSerialization.data(withJSONObject: header, options: [.sortedKeys])) + "."
            + Base64URL.encode(try JSONSerialization.data(withJSONObject: claims, options: [.sortedKeys]))
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        return input + "." + Base64URL.encode(try privateKey.signature(for: Data(input.utf8)).rawRepresentation)
    }
}
