import AppStore
import AppStoreSimulator
import Crypto
import Foundation
import LedgerDomain
import Testing
import X509

/// App Store JWS: the chain must end in a trusted root as of the payload's signedDate, with
/// Apple's markers; the signature must match; the bundle id and environment must be the app's.
/// The chains are the simulator's (a test root in Apple's shape); Apple's own root is tested by
/// its fingerprint.
@Suite struct SignedPayloadVerifierTests {
    struct Payload: AppStoreSignedPayload, Encodable {
        var transactionId = "2000000123456789"
        var bundleId: String? = "com.example.game"
        var environment: String? = "Sandbox"
        var signedDate = Date(timeIntervalSince1970: 1_795_000_000)

        var payloadBundleId: String? { bundleId }
        var payloadEnvironment: String? { environment }
    }

    static func json(_ payload: Payload) throws -> Data {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .millisecondsSince1970
        return try encoder.encode(payload)
    }

    func verify(_ jws: String, trusting roots: [Certificate], bundleId: String = "com.example.game",
                environment: StoreEnvironment? = .sandbox) async throws(SignedPayloadError) -> Payload {
        try await SignedPayloadVerifier(trustedRoots: roots).verify(jws, as: Payload.self, bundleId: bundleId, environment: environment)
    }

    func refusal(_ jws: String, trusting roots: [Certificate], bundleId: String = "com.example.game",
                 environment: StoreEnvironment? = .sandbox) async -> SignedPayloadError? {
        do {
            _ = try await verify(jws, trusting: roots, bundleId: bundleId, environment: environment)
            return nil
        } catch {
            return error
        }
    }

    @Test func appleRootCAG3ShipsWithTheFingerprintApplePublishes() {
        let digest = SHA256.hash(data: AppleRootCertificates.rootG3DER).map { String(format: "%02x", $0) }.joined()
        #expect(digest == "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179")
        #expect(digest == AppleRootCertificates.rootG3Fingerprint)
        #expect(String(describing: AppleRootCertificates.rootG3.subject).contains("CN=Apple Root CA - G3"))
    }

    @Test func aPayloadSignedByATrustedChainIsReadAndTheSameChainIsTrustedAgain() async throws {
        let authority = try SimulatorCertificateAuthority(now: Payload().signedDate)
        let jws = try authority.sign(try Self.json(Payload()))
        let verifier = SignedPayloadVerifier(trustedRoots: [authority.root])
        let payload = try await verifier.verify(jws, as: Payload.self, bundleId: "com.example.game", environment: .sandbox)
        #expect(payload.transactionId == "2000000123456789")
        var later = Payload()
        later.transactionId = "2000000123456790"
        later.signedDate += 3_600
        let again = try await verifier.verify(try authority.sign(try Self.json(later)), as: Payload.self, bundleId: "com.example.game", environment: nil)
        #expect(again.transactionId == "2000000123456790")
    }

    @Test func aChainEndingInAnUntrustedRootIsRefusedEvenWhenItCarriesItsRoot() async throws {
        let authority = try SimulatorCertificateAuthority(now: Payload().signedDate)
        let jws = try authority.sign(try Self.json(Payload()))
        guard case .untrustedChain = await refusal(jws, trusting: [AppleRootCertificates.rootG3]) else {
            Issue.record("the simulator's root was trusted without being configured")
            return
        }
        let other = try SimulatorCertificateAuthority(name: "Another", now: Payload().signedDate)
        #expect(await refusal(jws, trusting: [other.root]) != nil)
    }

    @Test func aBrokenChainIsRefused() async throws {
        let first = try SimulatorCertificateAuthority(now: Payload().signedDate)
        let second = try SimulatorCertificateAuthority(name: "Second", now: Payload().signedDate)
        // The first authority's leaf presented with the second's intermediate: the leaf was not issued by it.
        let jws = try first.sign(try Self.json(Payload()), chain: [first.leaf, second.intermediate, second.root])
        let error = await refusal(jws, trusting: [first.root, second.root])
        guard case .untrustedChain = error else { Issue.record("a broken chain gave \(String(describing: error))"); return }
        // No intermediate at all.
        let bare = try first.sign(try Self.json(Payload()), chain: [first.leaf])
        guard case .malformed = await refusal(bare, trusting: [first.root]) else { Issue.record("a chain without an intermediate was read"); return }
    }

    @Test func theChainIsCheckedAtTheSignedDateNotToday() async throws {
        let signed = Payload().signedDate
        // A leaf valid for five days ten days before the payload was signed: expired at signedDate.
        let expired = try SimulatorCertificateAuthority(options: .init(leafValidity: (signed - 10 * 86_400)...(signed - 5 * 86_400)),
                                                        now: signed - 8 * 86_400)
        let error = await refusal(try expired.sign(try Self.json(Payload())), trusting: [expired.root])
        guard case .untrustedChain(let reason) = error else { Issue.record("an expired leaf gave \(String(describing: error))"); return }
        #expect(reason.hasPrefix("the leaf certificate") && reason.contains("not at the payload's signedDate"), "\(reason)")
        // A payload signed while that leaf was valid is still trusted today.
        var old = Payload()
        old.signedDate = signed - 7 * 86_400
        #expect(try await verify(try expired.sign(try Self.json(old)), trusting: [expired.root]).transactionId == old.transactionId)
    }

    @Test func certificatesWithoutApplesMarkersAreRefused() async throws {
        let now = Payload().signedDate
        let noLeafMarker = try SimulatorCertificateAuthority(options: .init(leafMarker: false), now: now)
        let leafError = await refusal(try noLeafMarker.sign(try Self.json(Payload())), trusting: [noLeafMarker.root])
        #expect(leafError?.description.contains("1.2.840.113635.100.6.11.1") == true, "\(String(describing: leafError))")
        let noIntermediateMarker = try SimulatorCertificateAuthority(options: .init(intermediateMarker: false), now: now)
        let intermediateError = await refusal(try noIntermediateMarker.sign(try Self.json(Payload())), trusting: [noIntermediateMarker.root])
        #expect(intermediateError?.description.contains("1.2.840.113635.100.6.2.1") == true, "\(String(describing: intermediateError))")
    }

    @Test func anotherAppsOrAnotherEnvironmentsPayloadIsRefused() async throws {
        let authority = try SimulatorCertificateAuthority(now: Payload().signedDate)
        let jws = try authority.sign(try Self.json(Payload()))
        #expect(await refusal(jws, trusting: [authority.root], bundleId: "com.example.other")
            == .wrongBundle(expected: "com.example.other", found: "com.example.game"))
        #expect(await refusal(jws, trusting: [authority.root], environment: .production)
            == .wrongEnvironment(expected: "Production", found: "Sandbox"))
        var xcode = Payload()
        xcode.environment = "Xcode"
        #expect(await refusal(try authority.sign(try Self.json(xcode)), trusting: [authority.root]) == .wrongEnvironment(expected: "Sandbox", found: "Xcode"))
    }

    @Test func anAlteredPayloadOrSignatureOrAnotherAlgorithmIsRefused() async throws {
        let authority = try SimulatorCertificateAuthority(now: Payload().signedDate)
        let jws = try authority.sign(try Self.json(Payload()))
        let parts = jws.split(separator: ".").map(String.init)
        var richer = Payload()
        richer.transactionId = "2000000999999999"
        let otherPayload = try authority.sign(try Self.json(richer)).split(separator: ".").map(String.init)[1]
        #expect(await refusal([parts[0], otherPayload, parts[2]].joined(separator: "."), trusting: [authority.root]) == .badSignature)
        let flipped = String(parts[2].reversed())
        #expect(await refusal([parts[0], parts[1], flipped].joined(separator: "."), trusting: [authority.root]) == .badSignature)

        let none = Data(#"{"alg":"none"}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
        #expect(await refusal([none, parts[1], ""].joined(separator: "."), trusting: [authority.root]) == .unsupportedAlgorithm("none"))
        for garbage in ["", "abc", "a.b", "a.b.c.d", "!!.??.**"] {
            guard case .malformed = await refusal(garbage, trusting: [authority.root]) else { Issue.record("'\(garbage)' was not malformed"); continue }
        }
    }
}
