import Crypto
import Foundation

/// The digest that names content in the ledger: documents in the archive, facts in deduplication
/// keys. Lower-case hex SHA-256.
public enum ContentHash {
    /// Of a text's UTF-8 bytes.
    public static func sha256Hex(_ text: String) -> String {
        sha256Hex(Data(text.utf8))
    }

    public static func sha256Hex(_ data: Data) -> String {
        SHA256.hash(data: data).map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }
}
