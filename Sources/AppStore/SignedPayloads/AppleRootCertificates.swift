import Foundation
import SwiftASN1
import X509

/// The roots App Store signatures lead to. Apple Root CA - G3 ships inside this target (the
/// machines the ledger runs on need not reach Apple); its SHA-256 fingerprint is tested.
public enum AppleRootCertificates {
    /// SHA-256 of Apple Root CA - G3's DER, as Apple publishes it.
    public static let rootG3Fingerprint = "63343abfb89a6a03ebb57e9b3f5fa7be7c4f5c756f3017b3a8c488c3653e9179"

    /// The DER bytes of Apple Root CA - G3, from this target's resources.
    public static let rootG3DER: [UInt8] = {
        guard let url = Bundle.module.url(forResource: "AppleRootCA-G3", withExtension: "cer", subdirectory: "Resources"),
              let data = try? Data(contentsOf: url)
        else {
            // A resource of this target: missing means a broken build, not bad input.
            fatalError("AppleRootCA-G3.cer is missing from the AppStore bundle")
        }
        return Array(data)
    }()

    /// Apple Root CA - G3, parsed.
    public static let rootG3: Certificate = {
        do {
            return try Certificate(derEncoded: rootG3DER)
        } catch {
            fatalError("AppleRootCA-G3.cer in the AppStore bundle does not parse: \(error)")
        }
    }()
}

extension SignedPayloadVerifier {
    /// Apple's root and, when `testRootPEM` names a file, the test root in it (the simulator's,
    /// `ledger appstore-sim --root-out`): for tests and demos, never production.
    public static func trusting(testRootPEM path: String?) throws -> SignedPayloadVerifier {
        guard let path else { return SignedPayloadVerifier() }
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw TestRootError(message: "the test root file '\(path)' cannot be read: \(error.localizedDescription)")
        }
        do {
            let root = try Certificate(pemEncoded: text)
            return SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, root])
        } catch {
            throw TestRootError(message: "the test root file '\(path)' is not a PEM certificate")
        }
    }

    /// The subjects of the roots a chain may end in, for the start-up log.
    public var trustedRootSubjects: [String] { roots.map { "\($0.subject)" } }
}

/// A test root that could not be loaded.
public struct TestRootError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}
