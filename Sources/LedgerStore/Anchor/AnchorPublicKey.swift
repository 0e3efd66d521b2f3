import Crypto
import Foundation

/// The public half of an anchor signing key: what a verifier trusts.
///
/// On disk it is a PEM "PUBLIC KEY" (SubjectPublicKeyInfo), the form `openssl pkey -pubout`
/// writes for an Ed25519 key; in an anchor, the key's 32 bytes in base64.
public struct AnchorPublicKey: Sendable, Hashable, CustomStringConvertible {
    /// The key's 32 bytes.
    public let rawRepresentation: Data

    public init(rawRepresentation: Data) throws(LogAnchorError) {
        guard rawRepresentation.count == 32, (try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation)) != nil else {
            throw .keyFile("(public key)", "is not an Ed25519 public key: it must be 32 bytes")
        }
        self.rawRepresentation = rawRepresentation
    }

    /// Reads a public key file: the `.pub` file `ledger audit anchor-key` writes.
    public static func load(from path: String) throws(LogAnchorError) -> AnchorPublicKey {
        let contents = try AnchorFiles.readSmall(at: path).contents
        guard let der = PEM.decode(contents, label: "PUBLIC KEY"), der.count == prefix.count + 32, der.starts(with: prefix) else {
            throw .keyFile(path, "is not an Ed25519 public key in PEM (\"BEGIN PUBLIC KEY\"), as `ledger audit anchor-key` writes it to FILE.pub")
        }
        return try AnchorPublicKey(rawRepresentation: der.dropFirst(prefix.count))
    }

    /// The key in base64, as anchors carry it.
    public var base64: String { rawRepresentation.base64EncodedString() }

    /// A short name to compare keys by eye: `SHA256:` and the base64 of the key's SHA-256.
    public var fingerprint: String {
        "SHA256:" + Data(SHA256.hash(data: rawRepresentation)).base64EncodedString().replacingOccurrences(of: "=", with: "")
    }

    public var description: String { fingerprint }

    /// The PEM file's text.
    public var pem: String { PEM.encode(Self.prefix + rawRepresentation, label: "PUBLIC KEY") }

    func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        guard let key = try? Curve25519.Signing.PublicKey(rawRepresentation: rawRepresentation) else { return false }
        return key.isValidSignature(signature, for: message)
    }

    /// The DER of an Ed25519 SubjectPublicKeyInfo up to the key (RFC 8410): SEQUENCE { SEQUENCE
    /// { OID 1.3.101.112 }, BIT STRING { 32 bytes } }. The key is all that varies.
    private static let prefix = Data([0x30, 0x2A, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x03, 0x21, 0x00])
}

/// PEM, the base64 armour of key files (RFC 7468).
enum PEM {
    static func encode(_ der: Data, label: String) -> String {
        let base64 = der.base64EncodedString(options: [.lineLength64Characters, .endLineWithLineFeed])
        return "-----BEGIN \(label)-----\n\(base64)\n-----END \(label)-----\n"
    }

    /// The DER inside the first block with `label`, or nil when there is none or it is not base64.
    static func decode(_ text: Data, label: String) -> Data? {
        let text = String(decoding: text, as: UTF8.self)
        guard let begin = text.range(of: "-----BEGIN \(label)-----"),
              let end = text.range(of: "-----END \(label)-----", range: begin.upperBound..<text.endIndex)
        else { return nil }
        let body = text[begin.upperBound..<end.lowerBound].filter { !$0.isWhitespace }
        return Data(base64Encoded: String(body))
    }
}
