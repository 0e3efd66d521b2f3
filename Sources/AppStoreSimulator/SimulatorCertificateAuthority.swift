import AppStore
import Crypto
import Foundation
import LedgerDomain
import SwiftASN1
import X509

/// The simulator's stand-in for Apple's certificate authority: a test root, an intermediate and a
/// leaf made at start, in the shape of Apple's chain (P-256 keys, ECDSA with SHA-256, Apple's
/// marker extensions on the leaf and the intermediate), and JWS signed with the leaf as the App
/// Store signs StoreKit 2 transactions and notifications.
///
/// Nothing trusts this root unless told to: a ledger accepts its signatures only when an
/// operator names the root file (`--trust-simulator-root`).
public struct SimulatorCertificateAuthority: Sendable {
    /// What a test may want different from Apple's chain.
    public struct Options: Sendable {
        /// The leaf's validity; by default from a day before now for a year.
        public var leafValidity: ClosedRange<Date>?
        public var leafMarker = true
        public var intermediateMarker = true

        public init(leafValidity: ClosedRange<Date>? = nil, leafMarker: Bool = true, intermediateMarker: Bool = true) {
            self.leafValidity = leafValidity
            self.leafMarker = leafMarker
            self.intermediateMarker = intermediateMarker
        }
    }

    public let root: Certificate
    public let intermediate: Certificate
    public let leaf: Certificate
    /// The leaf's private key, raw (swift-crypto's key type is not Sendable here).
    let leafKeyBytes: Data

    public init(name: String = "Purchase Ledger App Store Simulator", options: Options = .init(), now: Date = Date()) throws {
        let rootKey = P256.Signing.PrivateKey()
        let intermediateKey = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let day: TimeInterval = 86_400
        let rootName = try DistinguishedName {
            CommonName("\(name) Root CA")
            OrganizationalUnitName("Test certification authority, not Apple")
            OrganizationName("Purchase Ledger")
        }
        let intermediateName = try DistinguishedName {
            CommonName("\(name) Intermediate CA")
            OrganizationName("Purchase Ledger")
        }
        let leafName = try DistinguishedName {
            CommonName("\(name) Signing")
            OrganizationName("Purchase Ledger")
        }
        func authority(marker: ASN1ObjectIdentifier?) throws -> Certificate.Extensions {
            var extensions = try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
            }
            if let marker { try extensions.append(Certificate.Extension(oid: marker, critical: false, value: [0x05, 0x00])) }
            return extensions
        }
        self.root = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(rootKey.publicKey),
            notValidBefore: now - 2 * day, notValidAfter: now + 3_650 * day, issuer: rootName, subject: rootName,
            extensions: try authority(marker: nil), issuerPrivateKey: .init(rootKey)
        )
        self.intermediate = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(intermediateKey.publicKey),
            notValidBefore: now - 2 * day, notValidAfter: now + 1_825 * day, issuer: rootName, subject: intermediateName,
            extensions: try authority(marker: options.intermediateMarker ? SignedPayloadVerifier.intermediateMarker : nil),
            issuerPrivateKey: .init(rootKey)
        )
        var leafExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
        }
        if options.leafMarker {
            try leafExtensions.append(Certificate.Extension(oid: SignedPayloadVerifier.leafMarker, critical: false, value: [0x05, 0x00]))
        }
        let validity = options.leafValidity ?? (now - day)...(now + 365 * day)
        self.leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey),
            notValidBefore: validity.lowerBound, notValidAfter: validity.upperBound, issuer: intermediateName, subject: leafName,
            extensions: leafExtensions, issuerPrivateKey: .init(intermediateKey)
        )
        self.leafKeyBytes = leafKey.rawRepresentation
    }

    /// The root as PEM, the file an operator hands the ledger to trust this simulator.
    public func rootPEM() throws -> String {
        try root.serializeAsPEM().pemString
    }

    /// A compact JWS of `payload` (JSON bytes), ES256 by the leaf, with `x5c` = leaf,
    /// intermediate, root unless `chain` says otherwise (a test's broken chain).
    public func sign(_ payload: Data, chain: [Certificate]? = nil) throws -> String {
        let x5c = try (chain ?? [leaf, intermediate, root]).map { certificate in
            var serializer = DER.Serializer()
            try serializer.serialize(certificate)
            return Data(serializer.serializedBytes).base64EncodedString()
        }
        let header = try JSONSerialization.data(withJSONObject: ["alg": "ES256", "x5c": x5c], options: [.sortedKeys])
        let signingInput = Base64URL.encode(header) + "." + Base64URL.encode(payload)
        let leafKey = try P256.Signing.PrivateKey(rawRepresentation: leafKeyBytes)
        let signature = try leafKey.signature(for: Data(signingInput.utf8))
        return signingInput + "." + Base64URL.encode(signature.rawRepresentation)
    }

    private init(root: Certificate, intermediate: Certificate, leaf: Certificate, leafKeyBytes: Data) {
        self.root = root
        self.intermediate = intermediate
        self.leaf = leaf
        self.leafKeyBytes = leafKeyBytes
    }

    /// A stranger's chain, for the tests of the webhook's defences: `count` intermediates with one
    /// subject and one key, each self-issued and differing only in a subject alternative name (so
    /// each seems to have issued every other), and a leaf they issued, with Apple's markers. A path
    /// builder offered them all searches their orderings; none leads to a trusted root. The
    /// authority signs with that leaf; its `intermediate` is the first look-alike.
    public static func lookAlikes(count: Int, now: Date = Date()) throws -> (authority: SimulatorCertificateAuthority, chain: [Certificate]) {
        let key = P256.Signing.PrivateKey()
        let leafKey = P256.Signing.PrivateKey()
        let day: TimeInterval = 86_400
        let name = try DistinguishedName {
            CommonName("Apple Worldwide Developer Relations Certification Authority")
            OrganizationName("Apple Inc.")
        }
        var intermediates: [Certificate] = []
        for index in 0..<max(count, 1) {
            var extensions = try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: nil))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                SubjectAlternativeNames([.dnsName("look-alike-\(index).example")])
            }
            try extensions.append(Certificate.Extension(oid: SignedPayloadVerifier.intermediateMarker, critical: false, value: [0x05, 0x00]))
            intermediates.append(try Certificate(
                version: .v3, serialNumber: .init(), publicKey: .init(key.publicKey), notValidBefore: now - 2 * day,
                notValidAfter: now + 365 * day, issuer: name, subject: name, extensions: extensions, issuerPrivateKey: .init(key)
            ))
        }
        var leafExtensions = try Certificate.Extensions {
            Critical(BasicConstraints.notCertificateAuthority)
            Critical(KeyUsage(digitalSignature: true))
        }
        try leafExtensions.append(Certificate.Extension(oid: SignedPayloadVerifier.leafMarker, critical: false, value: [0x05, 0x00]))
        let leaf = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: .init(leafKey.publicKey), notValidBefore: now - day, notValidAfter: now + 365 * day,
            issuer: name, subject: try DistinguishedName { CommonName("Prod ECC Mac App Store and iTunes Store Receipt Signing") },
            extensions: leafExtensions, issuerPrivateKey: .init(key)
        )
        let authority = SimulatorCertificateAuthority(root: intermediates[0], intermediate: intermediates[0], leaf: leaf,
                                                      leafKeyBytes: leafKey.rawRepresentation)
        return (authority, [leaf] + intermediates)
    }
}
