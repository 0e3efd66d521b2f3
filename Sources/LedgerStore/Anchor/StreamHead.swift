import Crypto
import Foundation

/// A stream's last event at the moment of an anchor: its version and chain hash.
///
/// The chain hash covers every earlier event of the stream, so a head pins the whole stream up
/// to that version: an anchor is a signed list of heads.
public struct StreamHead: Sendable, Hashable {
    public let streamID: String
    public let version: Int64
    /// The event's `hash` column: SHA-256, 32 bytes.
    public let hash: Data

    /// The Merkle leaf of this head: SHA-256 over a 0x00 byte, the stream id's UTF-8 bytes behind
    /// their length (4 bytes, big-endian), the version (8 bytes, big-endian) and the chain hash.
    /// The length prefix keeps any two heads apart; the 0x00 keeps a leaf apart from a node (0x01).
    var leafHash: Data {
        var hasher = SHA256()
        let id = Data(streamID.utf8)
        hasher.update(data: [0x00])
        hasher.update(data: Self.bigEndian(UInt32(id.count)))
        hasher.update(data: id)
        hasher.update(data: Self.bigEndian(UInt64(bitPattern: version)))
        hasher.update(data: hash)
        return Data(hasher.finalize())
    }

    private static func bigEndian<Integer: FixedWidthInteger>(_ value: Integer) -> Data {
        withUnsafeBytes(of: value.bigEndian) { Data($0) }
    }

    /// The order of an anchor's heads: stream ids by their UTF-8 bytes, PostgreSQL's `COLLATE "C"`.
    /// (Swift's `<` on strings compares Unicode scalars after normalization, which is not the same.)
    static func precedes(_ left: String, _ right: String) -> Bool {
        var left = left
        var right = right
        return left.withUTF8 { leftBytes in
            right.withUTF8 { rightBytes in
                let common = min(leftBytes.count, rightBytes.count)
                let order = common == 0 ? 0 : memcmp(leftBytes.baseAddress!, rightBytes.baseAddress!, common)
                return order != 0 ? order < 0 : leftBytes.count < rightBytes.count
            }
        }
    }

    /// Whether two stream ids are the same bytes, as the database tells streams apart. (Swift's
    /// `==` on strings also equates canonically equivalent spellings, such as a precomposed
    /// "é" and an "e" with a combining accent, which are two streams in the log.)
    static func same(_ left: String, _ right: String) -> Bool {
        left.utf8.elementsEqual(right.utf8)
    }
}
