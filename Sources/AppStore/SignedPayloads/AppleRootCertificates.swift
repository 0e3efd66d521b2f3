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
