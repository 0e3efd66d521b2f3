import Crypto
import Foundation
import LedgerDomain
import SwiftASN1
import X509

/// What every payload the App Store signs carries: when it was signed, for which app, in which
/// environment. A notification keeps the last two under `data`; its type says where.
public protocol AppStoreSignedPayload: Decodable, Sendable {
    /// When Apple signed it; the chain is checked as of this instant.
    var signedDate: Date { get }
    var payloadBundleId: String? { get }
    /// As Apple spells it: `Production`, `Sandbox` (also `Xcode`, `LocalTesting`).
    var payloadEnvironment: String? { get }
}

/// Verifies App Store JWS (StoreKit 2 transactions and renewal info, Server Notifications V2):
/// ES256 over `header.payload`, by the leaf of the header's `x5c` chain, which must lead to a
/// trusted root (Apple Root CA - G3 unless told otherwise) as of the payload's `signedDate`, with
/// Apple's marker extensions on the leaf and the intermediate; then the payload's bundle id and
/// environment must be the expected ones. The crypto is swift-crypto's and swift-certificates'.
///
/// The chain is taken as Apple builds it, by position: exactly three certificates, the leaf, the
/// intermediate that signed it, and a root (never trusted for being there: only the configured
/// roots are). Only that intermediate is offered to the path builder, so no chain a stranger
/// sends can make the search grow; a chain of another length, or a certificate too long to be
/// Apple's, is refused before any certificate is parsed. A payload signed later than now (beyond
/// `allowedClockSkew`) is refused too.
///
/// A chain that was validated once is remembered (by the digest of its leaf and intermediate,
/// with the instants between which all its certificates are valid), so the next payload signed by
/// the same leaf costs one signature check. Only validated chains are remembered, the least
/// recently used going first: junk cannot evict Apple's chains.
public struct SignedPayloadVerifier: Sendable {
    /// On the leaf: the certificate signs App Store receipts and payloads.
    public static let leafMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 11, 1]
    /// On the intermediate: Apple Worldwide Developer Relations.
    public static let intermediateMarker: ASN1ObjectIdentifier = [1, 2, 840, 113_635, 100, 6, 2, 1]
    /// How much later than now a payload may say it was signed (clocks differ a little).
    public static let allowedClockSkew: TimeInterval = 300
    /// An `x5c` entry longer than this (base64 of DER) is not one of Apple's (theirs are under 2 KB).
    static let maximumCertificateCharacters = 8_192

    let roots: [Certificate]
    let chains = ValidatedChains()
    let now: @Sendable () -> Date

    /// - Parameter trustedRoots: the roots a chain may end in; Apple's own by default. A test
    ///   root (the simulator's) is trusted only when an operator says so.
    public init(trustedRoots: [Certificate] = [AppleRootCertificates.rootG3], now: @escaping @Sendable () -> Date = { Date() }) {
        self.roots = trustedRoots
        self.now = now
    }

    /// The payload of `jws`, once every check passed. `environment` nil accepts either; `bundleId`
    /// nil is for payloads that name none (renewal info, checked inside a notification that does).
    public func verify<Payload: AppStoreSignedPayload>(
        _ jws: String, as type: Payload.Type, bundleId: String?, environment: StoreEnvironment?
    ) async throws(SignedPayloadError) -> Payload {
        let parts = Self.parts(of: jws)
        guard parts.count == 3 else { throw .malformed("a compact JWS has three dot-separated parts; this has \(parts.count)") }
        guard let headerData = Base64URL.decode(parts[0]), let payloadData = Base64URL.decode(parts[1]),
              let signatureData = Base64URL.decode(parts[2])
        else { throw .malformed("a part is not base64url") }

        let header: JWSHeader
        do { header = try JSONDecoder().decode(JWSHeader.self, from: headerData) } catch {
            throw .malformed("the header is not a JSON object with alg and x5c")
        }
        guard header.alg == "ES256" else { throw .unsupportedAlgorithm(header.alg) }
        guard let x5c = header.x5c, x5c.count == 3 else {
            throw .malformed("the header's x5c has \(header.x5c?.count ?? 0) certificates; Apple's has three: the leaf, the intermediate and the root")
        }
        guard x5c.allSatisfy({ $0.utf8.count <= Self.maximumCertificateCharacters }) else {
            throw .malformed("an x5c certificate is longer than \(Self.maximumCertificateCharacters) characters, which no App Store certificate is")
        }
        let payload: Payload
        do {
            let decoder = JSONDecoder()
            decoder.dateDecodingStrategy = .millisecondsSince1970
            payload = try decoder.decode(Payload.self, from: payloadData)
        } catch {
            throw .malformed("the payload is not a \(Payload.self): \(Self.describe(error))")
        }
        let now = self.now()
        guard payload.signedDate.timeIntervalSince(now) <= Self.allowedClockSkew else {
            throw .signedInTheFuture(signedDate: payload.signedDate, now: now)
        }

        let chainKey = ValidatedChains.key(leaf: x5c[0], intermediate: x5c[1])
        let keyBytes: Data
        if let kept = await chains.leafKey(of: chainKey, at: payload.signedDate) {
            keyBytes = kept
        } else {
            var certificates: [Certificate] = []
            for (index, text) in x5c.prefix(2).enumerated() {
                guard let der = Data(base64Encoded: text), let certificate = try? Certificate(derEncoded: Array(der)) else {
                    throw .malformed("x5c[\(index)] is not a base64 DER certificate")
                }
                certificates.append(certificate)
            }
            let window = try await checkChain(leaf: certificates[0], intermediate: certificates[1], at: payload.signedDate)
            guard let key = P256.Signing.PublicKey(certificates[0].publicKey) else {
                throw .untrustedChain("the leaf certificate's key is not a P-256 key")
            }
            keyBytes = key.x963Representation
            await chains.remember(chainKey, leafKey: keyBytes, from: window.lowerBound, until: window.upperBound)
        }
        guard let key = try? P256.Signing.PublicKey(x963Representation: keyBytes),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: signatureData),
              key.isValidSignature(signature, for: Data(jws.utf8[..<parts[1].endIndex]))
        else { throw .badSignature }

        if let bundleId, payload.payloadBundleId != bundleId { throw .wrongBundle(expected: bundleId, found: payload.payloadBundleId) }
        if let environment, payload.payloadEnvironment.flatMap(StoreEnvironment.init(responseValue:)) != environment {
            throw .wrongEnvironment(expected: environment.responseValue, found: payload.payloadEnvironment)
        }
        return payload
    }

    /// The dot-separated parts of a compact JWS, found among its bytes: splitting it as
    /// characters walked the whole text (three certificates) grapheme by grapheme, 9% of the
    /// server's CPU per notification.
    static func parts(of jws: String) -> [Substring] {
        let bytes = jws.utf8
        var parts: [Substring] = []
        var start = bytes.startIndex
        var index = start
        while index < bytes.endIndex {
            if bytes[index] == UInt8(ascii: ".") {
                parts.append(jws[start..<index])
                start = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        parts.append(jws[start..<bytes.endIndex])
        return parts
    }

    /// The leaf, signed by the intermediate, signed by a configured root, all valid as of `date`,
    /// with Apple's markers. Returns the period in which every certificate of the chain is valid.
    func checkChain(leaf: Certificate, intermediate: Certificate, at date: Date) async throws(SignedPayloadError) -> ClosedRange<Date> {
        // Validity first, in words: the verifier's own report names whole certificates.
        for (name, certificate) in [("leaf", leaf), ("intermediate", intermediate)] {
            guard certificate.notValidBefore <= date && date <= certificate.notValidAfter else {
                throw .untrustedChain(
                    "the \(name) certificate \(UntrustedText.quoted(String(describing: certificate.subject), limit: 160)) is valid from "
                        + "\(Self.iso(certificate.notValidBefore)) to \(Self.iso(certificate.notValidAfter)), not at the payload's signedDate \(Self.iso(date))"
                )
            }
        }
        var verifier = Verifier(rootCertificates: CertificateStore(roots)) {
            RFC5280Policy(validationTime: date)
            AppleMarkerPolicy()
        }
        // The one intermediate in its place, never a pool to search.
        switch await verifier.validate(leaf: leaf, intermediates: CertificateStore([intermediate])) {
        case .validCertificate(let chain):
            let all = Array(chain)
            let from = all.map(\.notValidBefore).max() ?? date, until = all.map(\.notValidAfter).min() ?? date
            return from...max(from, until)
        case .couldNotValidate(let failures):
            let reasons = failures.map { UntrustedText.quoted(String(describing: $0.policyFailureReason), limit: 300) }
            throw .untrustedChain(reasons.isEmpty
                ? "no chain from the leaf through the intermediate reaches a trusted root (as of \(Self.iso(date)))"
                : Array(Set(reasons)).sorted().prefix(3).joined(separator: "; ") + " (as of \(Self.iso(date)))")
        }
    }

    static func iso(_ date: Date) -> String {
        date.formatted(.iso8601)
    }

    static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): "\(key.stringValue) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context), DecodingError.dataCorrupted(let context):
            "\(context.codingPath.map(\.stringValue).joined(separator: ".")): \(context.debugDescription)"
        default: "\(error)"
        }
    }
}

/// The protected header of an App Store JWS.
struct JWSHeader: Decodable {
    let alg: String
    /// Base64 (not base64url) DER certificates: the leaf first.
    let x5c: [String]?
}

/// Apple's markers: the leaf signs App Store payloads, the intermediate is Apple's WWDR CA.
struct AppleMarkerPolicy: VerifierPolicy {
    let verifyingCriticalExtensions: [ASN1ObjectIdentifier] = []

    mutating func chainMeetsPolicyRequirements(chain: UnverifiedCertificateChain) async -> PolicyEvaluationResult {
        let certificates = Array(chain)
        guard certificates.count == 3 else {
            return .failsToMeetPolicy(reason: "the chain has \(certificates.count) certificates; an App Store chain has a leaf, an intermediate and the root")
        }
        guard certificates[0].extensions[oid: SignedPayloadVerifier.leafMarker] != nil else {
            return .failsToMeetPolicy(reason: "the leaf certificate lacks Apple's marker extension 1.2.840.113635.100.6.11.1")
        }
        guard certificates[1].extensions[oid: SignedPayloadVerifier.intermediateMarker] != nil else {
            return .failsToMeetPolicy(reason: "the intermediate certificate lacks Apple's marker extension 1.2.840.113635.100.6.2.1")
        }
        return .meetsPolicy
    }
}

/// Chains validated before, by the digest of their leaf and intermediate, with the leaf's key and
/// the period in which all their certificates are valid: a payload from a known leaf is checked
/// without parsing a certificate. Only validated chains come in; the least recently used goes first.
actor ValidatedChains {
    private var valid: [Data: (key: Data, from: Date, until: Date, used: UInt64)] = [:]
    private var clock: UInt64 = 0
    let capacity: Int

    init(capacity: Int = 256) {
        self.capacity = capacity
    }

    static func key(leaf: String, intermediate: String) -> Data {
        var hash = SHA256()
        hash.update(data: Data(leaf.utf8))
        hash.update(data: Data([0]))
        hash.update(data: Data(intermediate.utf8))
        return Data(hash.finalize())
    }

    func leafKey(of chain: Data, at date: Date) -> Data? {
        guard var kept = valid[chain], kept.from <= date, date <= kept.until else { return nil }
        clock += 1
        kept.used = clock
        valid[chain] = kept
        return kept.key
    }

    func remember(_ chain: Data, leafKey: Data, from: Date, until: Date) {
        clock += 1
        if valid[chain] == nil, valid.count >= capacity, let oldest = valid.min(by: { $0.value.used < $1.value.used })?.key {
            valid[oldest] = nil
        }
        valid[chain] = (leafKey, from, until, clock)
    }

    var count: Int { valid.count }
}
