import Foundation
import LedgerDomain

/// Why a signed payload (a JWS from the App Store) was refused. Every case says what was wrong
/// in words an operator can act on; nothing of a refused payload is recorded.
public enum SignedPayloadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Not a compact JWS (three base64url parts) or its header or payload is not the JSON expected.
    case malformed(String)
    /// The header names an algorithm other than ES256, the only one Apple signs with.
    case unsupportedAlgorithm(String)
    /// The `x5c` chain does not lead to a trusted root at the payload's `signedDate`, or a
    /// certificate lacks Apple's marker extension.
    case untrustedChain(String)
    /// The signature does not match the header and payload under the leaf certificate's key.
    case badSignature
    /// The payload is for another app.
    case wrongBundle(expected: String, found: String?)
    /// The payload is from another environment than the one the caller accepts.
    case wrongEnvironment(expected: String, found: String?)
    /// The payload says it was signed later than now, beyond the clocks' allowed skew.
    case signedInTheFuture(signedDate: Date, now: Date)

    public var description: String {
        switch self {
        case .malformed(let reason): "the signed payload is malformed: \(reason)"
        case .unsupportedAlgorithm(let alg): "the signed payload uses algorithm \(UntrustedText.quoted(alg)); the App Store signs with ES256 only"
        case .untrustedChain(let reason): "the signed payload's certificate chain is not trusted: \(reason)"
        case .badSignature: "the signed payload's signature does not match its contents (altered, or signed with another key)"
        case .wrongBundle(let expected, let found):
            "the signed payload is for bundle id \(found.map { UntrustedText.quoted($0) } ?? "none"), not '\(expected)'"
        case .wrongEnvironment(let expected, let found):
            "the signed payload is from the \(found.map { UntrustedText.quoted($0) } ?? "unnamed") environment, not '\(expected)'"
        case .signedInTheFuture(let signedDate, let now):
            "the signed payload's signedDate \(signedDate.formatted(.iso8601)) is later than now (\(now.formatted(.iso8601))) by more than "
                + "\(Int(SignedPayloadVerifier.allowedClockSkew)) s; the App Store signs what it sends now"
        }
    }

    /// Which check refused it, in one word, for metrics and a short log line.
    public var check: String {
        switch self {
        case .malformed: "malformed"
        case .unsupportedAlgorithm: "algorithm"
        case .untrustedChain: "chain"
        case .badSignature: "signature"
        case .wrongBundle: "bundle"
        case .wrongEnvironment: "environment"
        case .signedInTheFuture: "signed_date"
        }
    }
}
