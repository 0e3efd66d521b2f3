import Crypto
import Foundation

/// Signs a delivery as Standard Webhooks (standardwebhooks.com) does, so that its libraries verify
/// it: the HMAC-SHA256, under the secret's key, of `<webhook-id>.<webhook-timestamp>.<body>`, in
/// base64 after `v1,`. The id is the change's (the same on every retry, for de-duplication); the
/// timestamp is the attempt's, so a receiver can refuse old replays.
public struct WebhookSigner: Sendable {
    let secret: WebhookSecret

    public init(secret: WebhookSecret) {
        self.secret = secret
    }

    /// `v1,<base64 signature>` of `body` sent as `id` at `timestamp` (Unix seconds).
    public func signature(id: String, timestamp: Int64, body: String) -> String {
        let content = Data("\(id).\(timestamp).".utf8) + Data(body.utf8)
        let code = HMAC<SHA256>.authenticationCode(for: content, using: SymmetricKey(data: secret.key))
        return "v1," + Data(code).base64EncodedString()
    }

    /// Every header of the POST: the three Standard Webhooks headers, the content type and who sends it.
    public func headers(id: String, timestamp: Int64, body: String) -> [(name: String, value: String)] {
        [
            ("webhook-id", id),
            ("webhook-timestamp", String(timestamp)),
            ("webhook-signature", signature(id: id, timestamp: timestamp, body: body)),
            ("content-type", "application/json"),
            ("user-agent", Self.userAgent),
        ]
    }

    public static let userAgent = "PurchaseLedger-Webhooks/1"
}
