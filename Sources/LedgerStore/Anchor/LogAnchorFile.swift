import Foundation

/// The anchor's JSON file: read whole and checked for shape, or written a head at a time.
///
/// ```
/// {"format": "purchase-ledger-anchor/1",
///  "createdAt": "2026-05-01T12:00:00.123456Z", "logHeadPosition": 812, "eventCount": 790,
///  "publicKey": "<base64>",
///  "heads": [
///   {"stream": "catalog/com.example.app", "version": 4, "hash": "<hex>"},
///   ...
///  ],
///  "streamCount": 131, "merkleRoot": "<hex>", "signature": "<base64>"}
/// ```
///
/// The count, root and signature come last because they are known only once every head has been
/// read; the heads are written as they come from the database, so a million streams take no more
/// memory than one.
struct LogAnchorFile {
    let summary: LogAnchorSummary
    let signature: Data
    let heads: [StreamHead]

    /// Parses and checks the shape of an anchor; the signature and root are `LogAnchor.load`'s.
    init(decoding contents: Data, path: String) throws(LogAnchorError) {
        let file: Stored
        do {
            file = try JSONDecoder().decode(Stored.self, from: contents)
        } catch DecodingError.dataCorrupted(let context) where context.codingPath.isEmpty {
            throw .malformedAnchor(path, "it is not complete JSON (cut short, or not an anchor file at all)")
        } catch {
            throw .malformedAnchor(path, "it is not an anchor file: \(Self.describe(error))")
        }
        guard file.format == LogAnchorSummary.format else {
            throw .malformedAnchor(path, "its format is \"\(file.format)\", and this ledger reads \"\(LogAnchorSummary.format)\"")
        }
        guard !file.createdAt.isEmpty, file.createdAt.utf8.allSatisfy({ Self.timeCharacters.contains($0) }) else {
            throw .malformedAnchor(path, "createdAt \"\(file.createdAt)\" is not a UTC time")
        }
        guard file.logHeadPosition >= 0, file.eventCount >= 0, file.eventCount <= file.logHeadPosition else {
            throw .malformedAnchor(path, "logHeadPosition \(file.logHeadPosition) and eventCount \(file.eventCount) cannot both hold")
        }
        guard file.streamCount == file.heads.count else {
            throw .tamperedAnchor(path, "it lists \(file.heads.count) stream heads but says \(file.streamCount)")
        }
        guard let root = Hex.decode(file.merkleRoot, count: 32) else {
            throw .malformedAnchor(path, "merkleRoot is not 64 hexadecimal digits")
        }
        guard let signature = Data(base64Encoded: file.signature), signature.count == 64 else {
            throw .malformedAnchor(path, "signature is not an Ed25519 signature (64 bytes in base64)")
        }
        guard let keyBytes = Data(base64Encoded: file.publicKey), let key = try? AnchorPublicKey(rawRepresentation: keyBytes) else {
            throw .malformedAnchor(path, "publicKey is not an Ed25519 public key (32 bytes in base64)")
        }
        let heads = file.heads.map(\.head)
        for (number, head) in heads.enumerated() {
            guard head.hash.count == 32, head.version >= 1, !head.streamID.isEmpty else {
                throw .malformedAnchor(path, "head \(number + 1) (stream '\(head.streamID)') needs a version of 1 or more and a hash of 64 hexadecimal digits")
            }
            if number > 0, !StreamHead.precedes(heads[number - 1].streamID, head.streamID) {
                throw .malformedAnchor(path, "head \(number + 1) (stream '\(head.streamID)') is out of order or repeated: heads are listed once each, by stream id")
            }
        }
        summary = LogAnchorSummary(
            createdAt: file.createdAt, logHeadPosition: file.logHeadPosition, eventCount: file.eventCount,
            streamCount: file.streamCount, merkleRoot: root, publicKey: key
        )
        self.signature = signature
        self.heads = heads
    }

    private static let timeCharacters = Set("0123456789-:.TZ".utf8)

    private struct Stored: Decodable {
        let format: String
        let createdAt: String
        let logHeadPosition: Int64
        let eventCount: Int64
        let publicKey: String
        let heads: [Head]
        let streamCount: Int64
        let merkleRoot: String
        let signature: String

        /// A head, its hash turned into bytes as it is read (an empty hash when it is not hex), so
        /// a million heads are not held twice, as text and as bytes.
        struct Head: Decodable {
            let head: StreamHead

            private enum CodingKeys: String, CodingKey {
                case stream, version, hash
            }

            init(from decoder: any Decoder) throws {
                let container = try decoder.container(keyedBy: CodingKeys.self)
                head = StreamHead(
                    streamID: try container.decode(String.self, forKey: .stream),
                    version: try container.decode(Int64.self, forKey: .version),
                    hash: Hex.decode(try container.decode(String.self, forKey: .hash), count: 32) ?? Data()
                )
            }
        }
    }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, let context):
            "\(path(context.codingPath + [key])) is missing"
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context), DecodingError.dataCorrupted(let context):
            "\(path(context.codingPath)) is not what an anchor holds there"
        default:
            "\(error)"
        }
    }

    private static func path(_ keys: [any CodingKey]) -> String {
        keys.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined().trimmingPrefix(".").description
    }
}

/// Writes an anchor file as `LogAnchorFile` describes it, in pieces of about 64 KiB.
struct LogAnchorFileWriter {
    private let output: FileHandle
    private var buffer = Data()
    private var headsWritten = 0

    /// Starts the file: everything known before the first head.
    init(output: FileHandle, createdAt: String, logHeadPosition: Int64, eventCount: Int64, publicKey: AnchorPublicKey) {
        self.output = output
        buffer.append(contentsOf: """
            {"format": \(Self.quoted(LogAnchorSummary.format)),
             "createdAt": \(Self.quoted(createdAt)), "logHeadPosition": \(logHeadPosition), "eventCount": \(eventCount),
             "publicKey": \(Self.quoted(publicKey.base64)),
             "heads": [
            """.utf8)
    }

    mutating func append(_ head: StreamHead) throws(LogAnchorError) {
        buffer.append(contentsOf: (headsWritten == 0 ? "\n  " : ",\n  ").utf8)
        buffer.append(contentsOf: "{\"stream\": \(Self.quoted(head.streamID)), \"version\": \(head.version), \"hash\": \"\(Hex.encode(head.hash))\"}".utf8)
        headsWritten += 1
        if buffer.count >= 64 * 1024 { try flush() }
    }

    /// Ends the file with what is known only after the last head.
    mutating func finish(summary: LogAnchorSummary, signature: Data) throws(LogAnchorError) {
        buffer.append(contentsOf: """
            \(headsWritten == 0 ? "" : "\n ")],
             "streamCount": \(summary.streamCount), "merkleRoot": "\(Hex.encode(summary.merkleRoot))",
             "signature": \(Self.quoted(signature.base64EncodedString()))}

            """.utf8)
        try flush()
    }

    private mutating func flush() throws(LogAnchorError) {
        do {
            try output.write(contentsOf: buffer)
        } catch {
            throw .output("could not write the anchor: \(AnchorFiles.reason(error))")
        }
        buffer.removeAll(keepingCapacity: true)
    }

    /// A JSON string. Stream ids hold no control characters or spaces (the table checks them), but
    /// a quote or a backslash is allowed and escaped here all the same.
    private static func quoted(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) else {
            return "\"\(text)\""
        }
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case _ where scalar.value < 0x20: result += String(format: "\\u%04x", scalar.value)
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result + "\""
    }
}
