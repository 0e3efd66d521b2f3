import Foundation

/// Base64url (RFC 4648 §5) without padding: API keys, audit cursors, and JWS parts.
///
/// Works on bytes, not characters: a JWS header carries three certificates, and character-level
/// string work (`Character.isLetter`, `replacingOccurrences`) was most of a verification's cost.
public enum Base64URL {
    /// The text of `bytes`, unpadded.
    public static func encode(_ bytes: [UInt8]) -> String {
        encode(Data(bytes))
    }

    /// The text of `data`, unpadded.
    public static func encode(_ data: Data) -> String {
        var text = Array(data.base64EncodedString().utf8)
        text.removeAll { $0 == UInt8(ascii: "=") }
        for index in text.indices {
            if text[index] == UInt8(ascii: "+") { text[index] = UInt8(ascii: "-") } else if text[index] == UInt8(ascii: "/") { text[index] = UInt8(ascii: "_") }
        }
        return String(decoding: text, as: UTF8.self)
    }

    /// The bytes of `text` (padding optional), or nil when it holds anything but the base64url alphabet.
    public static func decode(_ text: String) -> Data? {
        decode(Substring(text))
    }

    /// Not generic on purpose: across modules a generic `StringProtocol` reading went unspecialized
    /// and cost a JWS verification about 40% more (p50 237 µs against 166).
    public static func decode(_ text: Substring) -> Data? {
        var bytes = [UInt8]()
        bytes.reserveCapacity(text.utf8.count + 3)
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                bytes.append(byte)
            case UInt8(ascii: "-"): bytes.append(UInt8(ascii: "+"))
            case UInt8(ascii: "_"): bytes.append(UInt8(ascii: "/"))
            case UInt8(ascii: "="): continue
            default: return nil
            }
        }
        bytes.append(contentsOf: repeatElement(UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4))
        return Data(base64Encoded: Data(bytes))
    }
}
