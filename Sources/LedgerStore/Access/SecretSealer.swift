import Crypto
import Foundation
import LedgerApplication

/// Seals App Store shared secrets for storage, and opens them again: AES-256-GCM, bound to the app.
///
/// The bundle id is the authenticated data, so a sealed secret copied into another app's row does
/// not open. Each sealed value is stored with the id of the key that sealed it (8 bytes of an HMAC
/// of a fixed label under the key, in hex: it names the key without revealing it), so a secret
/// that does not open says whether another key is configured or the value itself was damaged.
public struct SecretSealer: Sendable {
    /// Names the key in the database and in messages.
    public let keyID: String
    /// Where the key came from, for messages: `LEDGER_SECRET_KEY`, or the key file's path.
    public let origin: String
    /// The key's bytes (swift-crypto's `SymmetricKey` is not `Sendable`; one is made per use).
    private let keyBytes: Data
    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// The format byte in front of every sealed value, for a later change of algorithm.
    private static let format: UInt8 = 1

    public init(key: SymmetricKey, origin: String) throws(SecretError) {
        guard key.bitCount == 256 else {
            throw .invalidKey(origin, "it has \(key.bitCount / 8) bytes, not 32")
        }
        self.keyBytes = key.withUnsafeBytes { Data($0) }
        self.origin = origin
        let label = HMAC<SHA256>.authenticationCode(for: Data("purchase-ledger secret key id".utf8), using: key)
        self.keyID = Data(label).prefix(8).map { String(format: "%02x", $0) }.joined()
    }

    /// A new random key, e.g. for a key file made on first use.
    public static func generateKey() -> SymmetricKey {
        SymmetricKey(size: .bits256)
    }

    /// The secret sealed for `app`: format byte, nonce, ciphertext and tag.
    public func seal(_ secret: String, app: String) throws -> Data {
        let box = try AES.GCM.seal(Data(secret.utf8), using: key, authenticating: Data(app.utf8))
        guard let combined = box.combined else { throw SecretError.invalidKey(origin, "AES-GCM gave no combined form") }
        return Data([Self.format]) + combined
    }

    /// The secret of `app`, from a value sealed with the key named `sealedWith`.
    public func open(_ sealed: Data, sealedWith: String, app: String) throws(SecretError) -> String {
        guard sealedWith == keyID else {
            throw .unreadableSecret(app: app, "it was sealed with key \(sealedWith), but the key from \(origin) is \(keyID)")
        }
        guard sealed.first == Self.format,
              let box = try? AES.GCM.SealedBox(combined: sealed.dropFirst()),
              let plain = try? AES.GCM.open(box, using: key, authenticating: Data(app.utf8)),
              let secret = String(data: plain, encoding: .utf8)
        else {
            throw .unreadableSecret(app: app, "the stored value does not open with key \(keyID) (from \(origin)): it was changed or belongs to another app")
        }
        return secret
    }
}
