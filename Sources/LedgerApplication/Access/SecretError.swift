/// Why a shared secret could not be sealed or opened, or the key that seals them could not be had,
/// with what to fix. No message ever holds a secret or a key.
public struct SecretError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// No key is configured, and one is needed.
        case noKey = "no_secret_key"
        /// The configured key is not 32 bytes of base64, or its file cannot be read.
        case invalidKey = "invalid_secret_key"
        /// The key file can be read by its group or by others.
        case exposedKeyFile = "secret_key_file_exposed"
        /// A stored secret does not open with the configured key.
        case unreadableSecret = "shared_secret_unreadable"
    }

    public let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static let keyAdvice = "set LEDGER_SECRET_KEY to 32 random bytes in base64 (`openssl rand -base64 32`), or LEDGER_SECRET_KEY_FILE to a file holding them (mode 0600)"

    public static func noKey(_ need: String) -> Self {
        .init(.noKey, "\(need), and no secret key is configured: \(keyAdvice)")
    }

    public static func invalidKey(_ origin: String, _ problem: String) -> Self {
        .init(.invalidKey, "the secret key from \(origin) is not usable: \(problem); \(keyAdvice)")
    }

    public static func exposedKeyFile(_ path: String, mode: UInt32) -> Self {
        .init(.exposedKeyFile,
              "the secret key file \(path) can be read by others (mode \(String(mode, radix: 8))): `chmod 600 \(path)`, and replace the key if others may have read it")
    }

    public static func unreadableSecret(app: String, _ problem: String) -> Self {
        .init(.unreadableSecret,
              "the App Store shared secret of \(app) cannot be opened: \(problem); configure the key it was sealed with, or set the secret again (`ledger apps add \(app) --shared-secret-env VARIABLE`)")
    }

    public var description: String { message }
}
