import Foundation

/// What an anchor's signature covers: when it was taken, the log's head, the counts, the Merkle
/// root over every stream head, and the key that signs.
///
/// The heads themselves are covered through the root: a verifier recomputes it from the heads the
/// file lists, so a changed, added or removed head no longer matches the signed root.
public struct LogAnchorSummary: Sendable, Hashable {
    /// The anchor format this ledger writes and reads.
    public static let format = "purchase-ledger-anchor/1"

    /// The database's clock when the snapshot was taken, UTC, e.g. `2026-05-01T12:00:00.123456Z`.
    public let createdAt: String
    /// The highest position in the log, 0 for an empty log.
    public let logHeadPosition: Int64
    /// The number of events in the log, all at or below `logHeadPosition`.
    public let eventCount: Int64
    public let streamCount: Int64
    /// The RFC 6962 Merkle root over the stream heads in stream-id order (`MerkleRoot`).
    public let merkleRoot: Data
    public let publicKey: AnchorPublicKey

    init(createdAt: String, logHeadPosition: Int64, eventCount: Int64, streamCount: Int64, merkleRoot: Data, publicKey: AnchorPublicKey) {
        self.createdAt = createdAt
        self.logHeadPosition = logHeadPosition
        self.eventCount = eventCount
        self.streamCount = streamCount
        self.merkleRoot = merkleRoot
        self.publicKey = publicKey
    }

    public var merkleRootHex: String { Hex.encode(merkleRoot) }

    /// The bytes the signature is made over: the format, then one `name value` line per field in
    /// this order, each ending in a line feed. No value can hold a line feed (`createdAt` is
    /// checked when read), so no two summaries give the same bytes.
    public var signedBytes: Data {
        Data("""
            \(Self.format)
            created_at \(createdAt)
            log_head_position \(logHeadPosition)
            event_count \(eventCount)
            stream_count \(streamCount)
            merkle_root \(Hex.encode(merkleRoot))
            public_key \(publicKey.base64)

            """.utf8)
    }
}

/// Lowercase hexadecimal, as psql shows `bytea` (`encode(hash, 'hex')`), so a head in an anchor
/// can be compared with the row by eye.
enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    static func encode(_ data: Data) -> String {
        var bytes = [UInt8]()
        bytes.reserveCapacity(data.count * 2)
        for byte in data {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// The bytes of lowercase or uppercase hex text, or nil when it is not hex of `count` bytes.
    static func decode(_ text: String, count: Int) -> Data? {
        let characters = Array(text.utf8)
        guard characters.count == count * 2 else { return nil }
        var data = Data(capacity: count)
        var index = 0
        while index < characters.count {
            guard let high = value(characters[index]), let low = value(characters[index + 1]) else { return nil }
            data.append(high << 4 | low)
            index += 2
        }
        return data
    }

    private static func value(_ character: UInt8) -> UInt8? {
        switch character {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): character - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): character - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): character - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
