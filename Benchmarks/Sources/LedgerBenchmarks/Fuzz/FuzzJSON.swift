import Foundation
import LedgerDomain

/// JSON as the fuzzer edits it: members keep their order and may repeat, numbers keep the text
/// they were written with, and `raw` holds text no value can (a lone surrogate escape, `1e999`,
/// ten thousand nested brackets), so a mutated body says exactly what a careless or hostile
/// client could send. `Foundation`'s model can hold none of these.
public indirect enum FuzzJSON: Hashable, Sendable {
    case object([Member])
    case array([FuzzJSON])
    case string(String)
    /// A number literal exactly as written.
    case number(String)
    case bool(Bool)
    case null
    /// Written out as it is, valid JSON or not.
    case raw(String)

    public struct Member: Hashable, Sendable {
        public var key: String
        public var value: FuzzJSON

        public init(_ key: String, _ value: FuzzJSON) {
            self.key = key
            self.value = value
        }
    }

    /// An object from key-value pairs, in this order.
    public static func keyed(_ pairs: KeyValuePairs<String, FuzzJSON>) -> FuzzJSON {
        .object(pairs.map { Member($0.key, $0.value) })
    }

    // MARK: Writing

    /// The value as compact JSON text (or not JSON, where `raw` says so).
    public var text: String {
        var output = ""
        write(to: &output)
        return output
    }

    public var data: Data { Data(text.utf8) }

    private func write(to output: inout String) {
        switch self {
        case .object(let members):
            output += "{"
            for (index, member) in members.enumerated() {
                if index > 0 { output += "," }
                Self.writeString(member.key, to: &output)
                output += ":"
                member.value.write(to: &output)
            }
            output += "}"
        case .array(let elements):
            output += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { output += "," }
                element.write(to: &output)
            }
            output += "]"
        case .string(let text): Self.writeString(text, to: &output)
        case .number(let literal): output += literal
        case .bool(let flag): output += flag ? "true" : "false"
        case .null: output += "null"
        case .raw(let text): output += text
        }
    }

    private static func writeString(_ text: String, to output: inout String) {
        LedgerJSON.appendQuoted(text, to: &output)
    }

    // MARK: Reading (the seeds: well-formed bodies and answers)

    /// Parses JSON text; nil when it is not JSON.
    public init?(data: Data) {
        var reader = Reader(bytes: Array(data))
        guard let value = reader.value(), reader.atEnd else { return nil }
        self = value
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool {
            mutating get {
                skipSpace()
                return index == bytes.count
            }
        }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x0A, 0x0D, 0x09].contains(bytes[index]) { index += 1 }
        }

        mutating func value() -> FuzzJSON? {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "{"):
                index += 1
                var members: [Member] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
                    index += 1
                    return .object(members)
                }
                while true {
                    skipSpace()
                    guard let key = string() else { return nil }
                    skipSpace()
                    guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { return nil }
                    index += 1
                    guard let value = value() else { return nil }
                    members.append(Member(key, value))
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    guard bytes[index] == UInt8(ascii: "}") else { return nil }
                    index += 1
                    return .object(members)
                }
            case UInt8(ascii: "["):
                index += 1
                var elements: [FuzzJSON] = []
                skipSpace()
                if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
                    index += 1
                    return .array(elements)
                }
                while true {
                    guard let element = value() else { return nil }
                    elements.append(element)
                    skipSpace()
                    guard index < bytes.count else { return nil }
                    if bytes[index] == UInt8(ascii: ",") { index += 1; continue }
                    guard bytes[index] == UInt8(ascii: "]") else { return nil }
                    index += 1
                    return .array(elements)
                }
            case UInt8(ascii: "\""):
                return string().map(FuzzJSON.string)
            case UInt8(ascii: "t"): return literal("true", .bool(true))
            case UInt8(ascii: "f"): return literal("false", .bool(false))
            case UInt8(ascii: "n"): return literal("null", .null)
            default:
                let start = index
                while index < bytes.count, "+-0123456789.eE".utf8.contains(bytes[index]) { index += 1 }
                guard index > start else { return nil }
                return .number(String(decoding: bytes[start..<index], as: UTF8.self))
            }
        }

        mutating func literal(_ word: String, _ value: FuzzJSON) -> FuzzJSON? {
            let end = index + word.utf8.count
            guard end <= bytes.count, Array(bytes[index..<end]) == Array(word.utf8) else { return nil }
            index = end
            return value
        }

        mutating func string() -> String? {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { return nil }
            index += 1
            var scalars = String.UnicodeScalarView()
            var run: [UInt8] = []
            func flush() {
                scalars.append(contentsOf: String(decoding: run, as: UTF8.self).unicodeScalars)
                run.removeAll()
            }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""):
                    flush()
                    return String(scalars)
                case UInt8(ascii: "\\"):
                    flush()
                    guard index < bytes.count else { return nil }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "n"): scalars.append("\n")
                    case UInt8(ascii: "r"): scalars.append("\r")
                    case UInt8(ascii: "t"): scalars.append("\t")
                    case UInt8(ascii: "b"): scalars.append("\u{8}")
                    case UInt8(ascii: "f"): scalars.append("\u{C}")
                    case UInt8(ascii: "u"):
                        guard let unit = hex4() else { return nil }
                        if (0xD800..<0xDC00).contains(unit), index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                           bytes[index + 1] == UInt8(ascii: "u") {
                            index += 2
                            guard let low = hex4(), (0xDC00..<0xE000).contains(low) else { return nil }
                            scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00))!)
                        } else {
                            guard let scalar = Unicode.Scalar(unit) else { return nil }
                            scalars.append(scalar)
                        }
                    default: scalars.append(Unicode.Scalar(escape))
                    }
                default:
                    run.append(byte)
                }
            }
            return nil
        }

        mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count, let unit = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16) else {
                return nil
            }
            index += 4
            return unit
        }
    }
}
