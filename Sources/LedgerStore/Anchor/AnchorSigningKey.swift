import Crypto
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The Ed25519 private key that signs anchors.
///
/// On disk it is a PEM "PRIVATE KEY" (PKCS #8), the form `openssl genpkey -algorithm ed25519`
/// writes, in a file only its owner may read: it is created with mode 0600 and refused when its
/// mode lets anyone else in. Keep it away from the database server, so that whoever can change
/// the database cannot also sign an anchor of the changed log.
public struct AnchorSigningKey: Sendable {
    /// The key's 32 bytes (Ed25519's seed).
    private let rawRepresentation: Data
    public let publicKey: AnchorPublicKey

    private init(rawRepresentation: Data) throws(LogAnchorError) {
        guard let key = try? Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation) else {
            throw .keyFile("(private key)", "is not an Ed25519 private key: it must be 32 bytes")
        }
        self.rawRepresentation = rawRepresentation
        self.publicKey = try AnchorPublicKey(rawRepresentation: key.publicKey.rawRepresentation)
    }

    /// A new random key, written to `path` (mode 0600 from the start; an existing file is never
    /// overwritten) and its public key to `path.pub`.
    public static func create(at path: String) throws(LogAnchorError) -> AnchorSigningKey {
        let publicPath = path + ".pub"
        guard !FileManager.default.fileExists(atPath: publicPath) else {
            throw .keyFile(publicPath, "already exists: it is never overwritten. Choose another name, or move the old key pair away first")
        }
        let key = try AnchorSigningKey(rawRepresentation: Curve25519.Signing.PrivateKey().rawRepresentation)
        try AnchorFiles.createNew(at: path, mode: 0o600, contents: Data(PEM.encode(prefix + key.rawRepresentation, label: "PRIVATE KEY").utf8))
        do {
            try AnchorFiles.createNew(at: publicPath, mode: 0o644, contents: Data(key.publicKey.pem.utf8))
        } catch {
            // A private key without its public half would be a key nobody can verify with.
            unlink(path)
            throw error
        }
        return key
    }

    /// Reads a private key file, refusing one that other users can read or write.
    public static func load(from path: String) throws(LogAnchorError) -> AnchorSigningKey {
        let (contents, mode) = try AnchorFiles.readSmall(at: path)
        guard mode & 0o077 == 0 else {
            throw .unsafeKeyFile(path, mode: mode)
        }
        guard let der = PEM.decode(contents, label: "PRIVATE KEY"), der.count == prefix.count + 32, der.starts(with: prefix) else {
            throw .keyFile(path, "is not an Ed25519 private key in PEM (\"BEGIN PRIVATE KEY\"), as `ledger audit anchor-key` or `openssl genpkey -algorithm ed25519` write it")
        }
        return try AnchorSigningKey(rawRepresentation: der.dropFirst(prefix.count))
    }

    /// An Ed25519 signature of `message`.
    func signature(for message: Data) throws(LogAnchorError) -> Data {
        do {
            return try Curve25519.Signing.PrivateKey(rawRepresentation: rawRepresentation).signature(for: message)
        } catch {
            throw .output("the anchor could not be signed: \(error)")
        }
    }

    /// The DER of an Ed25519 PKCS #8 PrivateKeyInfo up to the key (RFC 8410): SEQUENCE { INTEGER 0,
    /// SEQUENCE { OID 1.3.101.112 }, OCTET STRING { OCTET STRING { 32 bytes } } }.
    private static let prefix = Data([
        0x30, 0x2E, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2B, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20,
    ])
}
