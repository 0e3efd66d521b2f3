import Crypto
import Foundation

/// Verifies a webhook delivery as docs/webhooks.md tells a receiver to, written from that recipe
/// and not with the ledger's signer: HMAC-SHA256 over `<id>.<timestamp>.<body>`, keyed with the
/// base64-decoded secret after `whsec_`, compared with each `v1,` signature of the header.
public enum WebhookVerification {
    public static func verify(secret: String, id: String, timestamp: String, signatureHeader: String, body: Data) -> Bool {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))) else { return false }
        let signed = Data(id.utf8) + Data(".".utf8) + Data(timestamp.utf8) + Data(".".utf8) + body
        let expected = Data(HMAC<SHA256>.authenticationCode(for: signed, using: SymmetricKey(data: key))).base64EncodedString()
        return signatureHeader.split(separator: " ").contains { $0.hasPrefix("v1,") && $0.dropFirst(3) == expected }
    }
}
