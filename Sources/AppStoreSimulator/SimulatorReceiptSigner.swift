import AppStore
import Crypto
import Foundation

/// Issues and authenticates simulator receipts: base64 of `{"payload": base64(JSON), "signature": base64(HMAC-SHA256)}`.
///
/// The key is the simulator's own: a receipt from another simulator (another key), or one whose bytes
/// were changed, fails authentication and answers 21003, as a forged receipt does at Apple.
struct SimulatorReceiptSigner: Sendable {
    /// Why a receipt was not accepted; the `verifyReceipt` status to answer.
    enum Refusal: Error, Equatable {
        /// Not base64 at all (21002).
        case malformed
        /// Decodes, but was not issued by this key or was changed (21003).
        case notAuthentic
    }

    private struct Envelope: Codable {
        var payload: String
        var signature: String
    }

    /// The key's bytes; `SymmetricKey` itself is not `Sendable`, so it is rebuilt per use (a copy of 32 bytes).
    private let keyBytes: [UInt8]

    private var key: SymmetricKey { SymmetricKey(data: keyBytes) }

    /// A key from text given on the command line (its SHA-256, so any length works), or a random one.
    init(keyText: String?) {
        if let keyText {
            self.keyBytes = Array(SHA256.hash(data: Data(keyText.utf8)))
        } else {
            self.keyBytes = (0..<32).map { _ in UInt8.random(in: 0...255) }
        }
    }

    func issue(_ payload: SimulatorReceiptPayload) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        // Encoding a struct of strings and integers cannot fail.
        let payloadData = (try? encoder.encode(payload)) ?? Data()
        let signature = Data(HMAC<SHA256>.authenticationCode(for: payloadData, using: key))
        let envelope = Envelope(payload: payloadData.base64EncodedString(), signature: signature.base64EncodedString())
        let envelopeData = (try? encoder.encode(envelope)) ?? Data()
        return envelopeData.base64EncodedString()
    }

    func open(_ receiptData: String) -> Result<SimulatorReceiptPayload, Refusal> {
        guard !receiptData.isEmpty, let envelopeData = Data(base64Encoded: receiptData, options: .ignoreUnknownCharacters),
              !envelopeData.isEmpty
        else { return .failure(.malformed) }
        guard let envelope = try? JSONDecoder().decode(Envelope.self, from: envelopeData),
              let payloadData = Data(base64Encoded: envelope.payload),
              let signature = Data(base64Encoded: envelope.signature),
              HMAC<SHA256>.isValidAuthenticationCode(signature, authenticating: payloadData, using: key),
              let payload = try? JSONDecoder().decode(SimulatorReceiptPayload.self, from: payloadData)
        else { return .failure(.notAuthentic) }
        return .success(payload)
    }
}
