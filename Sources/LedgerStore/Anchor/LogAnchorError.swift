/// Why a signing key or an anchor could not be used, with what to do about it.
///
/// The codes split what an operator fixes (a key file's mode, a missing file) from what means the
/// anchor itself cannot be trusted (`tamperedAnchor`, `untrustedKey`): `ledger audit verify` exits
/// with a status of its own for those, apart from "the log was altered".
public struct LogAnchorError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        /// A key file is missing, unreadable, already exists, or is not an Ed25519 key.
        case keyFile
        /// The private key file can be read or written by other users.
        case unsafeKeyFile
        /// The anchor file cannot be read, or is not an anchor this ledger writes.
        case malformedAnchor
        /// The anchor's signature or its list of heads does not hold: it was changed after signing.
        case tamperedAnchor
        /// The anchor is signed, but not by the key the verifier trusts.
        case untrustedKey
        /// Writing the anchor or a key failed, or the log could not be read as an anchor needs.
        case output
    }

    public let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `problem` follows the path as a predicate: "is not …", "cannot be opened: …".
    public static func keyFile(_ path: String, _ problem: String) -> Self {
        .init(.keyFile, "key file \(path) \(problem)")
    }

    public static func unsafeKeyFile(_ path: String, mode: UInt32) -> Self {
        .init(
            .unsafeKeyFile,
            "key file \(path) has mode 0\(String(mode & 0o777, radix: 8)), so other users can read or change the anchor "
                + "signing key: refusing to use it. Restrict it with `chmod 600 \(path)`, and create new anchors "
                + "with a new key (`ledger audit anchor-key`) if anyone else may have read it"
        )
    }

    public static func malformedAnchor(_ path: String, _ problem: String) -> Self {
        .init(.malformedAnchor, "anchor \(path) is not usable: \(problem)")
    }

    public static func tamperedAnchor(_ path: String, _ problem: String) -> Self {
        .init(.tamperedAnchor, "anchor \(path) was changed after it was signed: \(problem). It proves nothing about the log; use another copy of it")
    }

    public static func untrustedKey(_ path: String, signedBy: String, trusted: String) -> Self {
        .init(
            .untrustedKey,
            "anchor \(path) is signed by key \(signedBy), not by the trusted key \(trusted): it was not made with your "
                + "signing key, so it proves nothing about the log"
        )
    }

    public static func output(_ message: String) -> Self {
        .init(.output, message)
    }

    public var description: String { message }
}
