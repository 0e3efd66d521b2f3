import Foundation

/// Mutates JSON bodies the way broken clients, proxies and attackers do: values replaced by
/// extreme or odd ones (huge and negative numbers, NaN-like and date-like text, control
/// characters, long and non-Latin strings, wrong types, nulls), keys dropped, renamed, repeated
/// or added, containers emptied or nested thousands deep, parts of other bodies spliced in; then
/// sometimes the bytes themselves: bits flipped, spans deleted or repeated, the text cut short,
/// invalid UTF-8.
///
/// Every choice comes from the case's `FuzzRandom`, so a seed and a case index give the same body.
public struct JSONMutator: Sendable {
    /// Bodies to splice from (the other seeds of the same target).
    public let donors: [FuzzJSON]

    /// A mutated copy of `seed` as bytes, and what was done to it (for the report of a failure).
    public func mutate(_ seed: FuzzJSON, random: inout FuzzRandom) -> (body: Data, steps: [String]) {
        var value = seed
        var steps: [String] = []
        if random.chance(90) {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                steps.append(mutateTree(&value, random: &random))
            }
        }
        var bytes = Array(value.text.utf8)
        if steps.isEmpty || random.chance(20) {
            for _ in 0..<Int.random(in: 1...3, using: &random) {
                steps.append(mutateBytes(&bytes, random: &random))
            }
        }
        return (Data(bytes), steps)
    }

    // MARK: Mutations of the value

    private func mutateTree(_ root: inout FuzzJSON, random: inout FuzzRandom) -> String {
        let paths = Self.paths(in: root)
        let path = random.pick(paths)
        let node = root[path]
        let name = Self.describe(path, in: root)
        var replacement = node
        let step: String
        switch (node, Int.random(in: 0..<10, using: &random)) {
        case (.object(var members), 0...4) where !members.isEmpty:
            let index = Int.random(in: 0..<members.count, using: &random)
            let key = members[index].key
            switch Int.random(in: 0..<6, using: &random) {
            case 0:
                members.remove(at: index)
                step = "drop \(name).\(key)"
            case 1:
                members[index].key = Self.renamed(key, random: &random)
                step = "rename \(name).\(key) to \(members[index].key.debugDescription)"
            case 2:
                let odd = Self.oddValue(random: &random)
                members.insert(.init(key, odd), at: random.chance(50) ? index : members.count)
                step = "repeat key \(name).\(key) with \(odd.summary)"
            case 3:
                let odd = Self.oddValue(random: &random)
                let newKey = random.pick(["", "__proto__", "constructor", "userID", "extra", key + "2", String(repeating: "k", count: 300)])
                members.append(.init(newKey, odd))
                step = "add key \(newKey.prefix(20).debugDescription) to \(name)"
            case 4:
                members.shuffle(using: &random)
                step = "reorder the keys of \(name)"
            default:
                members = []
                step = "empty \(name)"
            }
            replacement = .object(members)
        case (.array(var elements), 0...4) where !elements.isEmpty:
            let index = Int.random(in: 0..<elements.count, using: &random)
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                elements.remove(at: index)
                step = "drop \(name)[\(index)]"
            case 1:
                let copies = Self.bounded(random.pick([1, 2, 50]), of: elements[index].text.utf8.count)
                elements.insert(contentsOf: repeatElement(elements[index], count: copies), at: index)
                step = "repeat \(name)[\(index)] \(copies) more times"
            case 2:
                elements.append(Self.oddValue(random: &random))
                step = "append to \(name)"
            default:
                elements = []
                step = "empty \(name)"
            }
            replacement = .array(elements)
        case (.string(let text), 0...3) where !text.isEmpty && text.allSatisfy(\.isNumber) && random.chance(50):
            // Numbers sent as text (the App Store's `*_ms`, quantities, ids): their edges, as text.
            replacement = .string(Self.mutatedNumber(text, random: &random))
            step = "change the number text \(name) to \(replacement.summary)"
        case (.string(let text), 0...3):
            replacement = .string(Self.mutatedString(text, random: &random))
            step = "edit the text of \(name)"
        case (.number(let literal), 0...3):
            replacement = .number(Self.mutatedNumber(literal, random: &random))
            step = "change the number \(name) to \(replacement.summary)"
        case (_, 4...5):
            replacement = Self.changedType(node, random: &random)
            step = "change the type of \(name) to \(replacement.summary)"
        case (_, 6) where !donors.isEmpty:
            let donor = random.pick(donors)
            replacement = donor[random.pick(Self.paths(in: donor))]
            step = "splice into \(name): \(replacement.summary)"
        case (_, 7):
            let depth = random.pick([8, 64, 600, 5_000, 30_000])
            replacement = Self.nested(node, depth: depth, random: &random)
            step = "nest \(name) \(depth) deep"
        default:
            replacement = Self.oddValue(random: &random)
            step = "replace \(name) with \(replacement.summary)"
        }
        root[path] = replacement
        return step
    }

    /// Every node's path (member or element indexes from the root), the root's included.
    static func paths(in root: FuzzJSON) -> [[Int]] {
        var found: [[Int]] = []
        func visit(_ node: FuzzJSON, _ path: [Int]) {
            found.append(path)
            switch node {
            case .object(let members): for (index, member) in members.enumerated() { visit(member.value, path + [index]) }
            case .array(let elements): for (index, element) in elements.enumerated() { visit(element, path + [index]) }
            default: break
            }
        }
        visit(root, [])
        return found
    }

    /// A path as a reader would write it: `receipt.in_app[2].purchase_date_ms`.
    static func describe(_ path: [Int], in root: FuzzJSON) -> String {
        var name = "body"
        var node = root
        for index in path {
            switch node {
            case .object(let members):
                name += "." + members[index].key
                node = members[index].value
            case .array(let elements):
                name += "[\(index)]"
                node = elements[index]
            default: return name
            }
        }
        return name
    }

    private static func renamed(_ key: String, random: inout FuzzRandom) -> String {
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return key.uppercased()
        case 1: return key + "_"
        case 2: return ""
        case 3: return " " + key
        default: return String(key.dropLast())
        }
    }

    private static func mutatedString(_ text: String, random: inout FuzzRandom) -> String {
        var scalars = Array(text.unicodeScalars)
        let position = Int.random(in: 0...scalars.count, using: &random)
        switch Int.random(in: 0..<10, using: &random) {
        case 0:
            scalars.insert(random.pick(["\u{0}", "\u{1}", "\u{7F}", "\n", "\u{202E}", "\u{FEFF}", "\u{1F600}", "\"", "\\", " ", "é", "\u{301}"]),
                           at: position)
        case 1: scalars = Array(scalars[..<position])
        case 2: scalars.removeAll()
        case 3:
            let unit = text.isEmpty ? "x" : text
            scalars = Array(String(repeating: unit, count: bounded(random.pick([2, 20, 400]), of: unit.utf8.count)).unicodeScalars)
        case 4: scalars = Array(text.uppercased().unicodeScalars)
        case 5: scalars = Array((" " + text + "\t").unicodeScalars)
        case 6: scalars = Array((random.pick(["=", "+", "-", "@", "%00", "../"]) + text).unicodeScalars)
        case 7: scalars = Array(String(repeating: random.pick(["a", "ñ", "测", "😀"]), count: random.pick([255, 256, 1_000, 70_000])).unicodeScalars)
        case 8 where !scalars.isEmpty: scalars[min(position, scalars.count - 1)] = random.pick(["0", "Z", "-", ".", "\u{0}"])
        default: scalars.reverse()
        }
        var result = String.UnicodeScalarView()
        result.append(contentsOf: scalars)
        return String(result)
    }

    /// The largest a mutation makes a body part: past every limit of the API (2 MiB for receipts),
    /// short of the memory of the machine. Unbounded, three repetitions of a long text in one case
    /// asked for 45 GB.
    public static let largestPart = 3_000_000

    /// `copies`, fewer when that many copies of `bytes` would pass `largestPart`.
    private static func bounded(_ copies: Int, of bytes: Int) -> Int {
        max(1, min(copies, largestPart / max(bytes, 1)))
    }

    private static func mutatedNumber(_ literal: String, random: inout FuzzRandom) -> String {
        let value = Int64(literal) ?? 0
        switch Int.random(in: 0..<8, using: &random) {
        case 0: return String(value &+ 1)
        case 1: return String(value &- 1)
        case 2: return "-" + literal
        case 3: return literal + random.pick(["000", "000000000000"])
        case 4: return literal + ".5"
        case 5: return literal + "e400"
        case 6: return "0" + literal
        default: return random.pick(["0", "-0", "1e309", "9223372036854775807", "9223372036854775808", "-9223372036854775808", "1E2", "1.0"])
        }
    }

    private static func changedType(_ node: FuzzJSON, random: inout FuzzRandom) -> FuzzJSON {
        switch Int.random(in: 0..<6, using: &random) {
        case 0: return .string(node.text)
        case 1: return .array([node])
        case 2: return .keyed(["value": node])
        case 3: return .null
        case 4: return .bool(random.chance(50))
        default:
            if case .string(let text) = node, let number = Double(text), number.isFinite { return .number(text) }
            return .number(random.pick(["0", "1", "-1"]))
        }
    }

    private static func nested(_ node: FuzzJSON, depth: Int, random: inout FuzzRandom) -> FuzzJSON {
        let inner = node.text
        if random.chance(50) {
            return .raw(String(repeating: "[", count: depth) + inner + String(repeating: "]", count: depth))
        }
        return .raw(String(repeating: "{\"a\":", count: depth) + inner + String(repeating: "}", count: depth))
    }

    /// A value chosen to break a reader: the edges of number types, text that looks like
    /// numbers, times, amounts or commands, control and non-Latin characters, wrong types.
    static func oddValue(random: inout FuzzRandom) -> FuzzJSON {
        switch Int.random(in: 0..<6, using: &random) {
        case 0:
            return .number(random.pick([
                "0", "-1", "1", "2147483648", "-2147483649", "9223372036854775807", "9223372036854775808",
                "-9223372036854775808", "-9223372036854775809", "18446744073709551616", "1e308", "1e309", "-1e309",
                "1e-400", "0.5", "-0", "1.0", "1E2", "123456789012345678901234567890",
            ]))
        case 1, 2:
            return .string(random.pick([
                "", " ", "0", "-1", "NaN", "Infinity", "-Infinity", "null", "true", "false", "yes",
                "9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999", "1e309",
                "2026-02-30T12:00:00Z", "2026-01-31T12:00:00.000Z", "0000-00-00T00:00:00Z", "9999-12-31T23:59:59.999Z",
                "+275760-09-13T00:00:00Z", "-271821-04-20T00:00:00Z", "2013-01-01 00:00:00 Etc/GMT",
                "0000-00-00 00:00:00 Etc/GMT", "9999-12-31 23:59:59 Etc/GMT", "2013-01-01 00:00:1e300 Etc/GMT",
                "2013-01-01 00:00:nan Etc/GMT", "2013-01-01 00:00:-inf Etc/GMT", "99999999999-01-01 00:00:00 Etc/GMT",
                "2013-01-01 00:00:00 Nowhere/Zone", "2013-01-01 00:00:00 +9999", "P1M", "P0D", "P99999999Y", "PT1S", "P-1M",
                "USD", "usd", "XXX", "0.99", "-0.99", "1e3", "0.999999999999999999999", "99999999999999999999.99",
                "consumable", "auto_renewable", "non_renewing", "unknown", "\u{0}", "a\u{0}b", "\u{1}\u{1F}", "\u{7F}",
                "\u{202E}evil", "e\u{301}", "\u{1F600}", "\u{FEFF}", "\u{FFFF}", "\u{1D4B3}", "\u{0645}\u{0631}\u{062D}\u{0628}\u{0627}",
                "\u{6D4B}\u{8BD5}", "'; DROP TABLE ledger.events; --", "=HYPERLINK(\"http://x\")", "+1", "@SUM(1)",
                "../../etc/passwd", "%00", "%2F", "\\", "\"", "<script>alert(1)</script>", "21006", "21007", "0", "1",
            ]))
        case 3:
            return .string(String(repeating: random.pick(["a", "9", "ñ", "\u{1F600}"]), count: random.pick([255, 256, 10_000, 70_000])))
        case 4:
            return .raw(random.pick([
                "\"\\ud800\"", "\"\\udfff\\ud800\"", "\"\\u0000\"", "1e999", "-", "NaN", "Infinity", "01", ".5", "+1",
                "0x10", "tru", "nul", "\"unterminated", "'single'", "[1,]", "{\"a\":1,}", "{\"a\"}", "\"\\x41\"",
            ]))
        default:
            return random.pick([.null, .bool(true), .bool(false), .array([]), .object([]), .array([.null]), .keyed(["": .null])])
        }
    }

    // MARK: Mutations of the bytes

    private func mutateBytes(_ bytes: inout [UInt8], random: inout FuzzRandom) -> String {
        if bytes.isEmpty { bytes = [UInt8(ascii: "{")] }
        let at = Int.random(in: 0..<bytes.count, using: &random)
        switch Int.random(in: 0..<9, using: &random) {
        case 0:
            bytes[at] ^= UInt8(1) << UInt8.random(in: 0..<8, using: &random)
            return "flip a bit of byte \(at)"
        case 1:
            bytes[at] = UInt8.random(in: 0...255, using: &random)
            return "replace byte \(at)"
        case 2:
            let inserted: [UInt8] = random.pick([[0x00], [0xFF], [0xC0, 0x80], [0xED, 0xA0, 0x80], [0xEF, 0xBB, 0xBF], [0x22], [0x7B],
                                                 [0x7D], [0x5B], [0x5D], [0x2C], [0x3A], [0x5C], [0x0A]])
            bytes.insert(contentsOf: inserted, at: at)
            return "insert bytes \(inserted) at \(at)"
        case 3:
            let end = min(bytes.count, at + Int.random(in: 1...64, using: &random))
            bytes.removeSubrange(at..<end)
            return "delete bytes \(at)..<\(end)"
        case 4:
            let end = min(bytes.count, at + Int.random(in: 1...64, using: &random))
            bytes.insert(contentsOf: bytes[at..<end], at: end)
            return "repeat bytes \(at)..<\(end)"
        case 5:
            bytes = Array(bytes[..<at])
            return "cut the body at byte \(at)"
        case 6 where !donors.isEmpty:
            let other = Array(random.pick(donors).text.utf8)
            let from = Int.random(in: 0..<max(other.count, 1), using: &random)
            bytes = Array(bytes[..<at]) + other[min(from, other.count)...]
            return "splice another body in at byte \(at)"
        case 7:
            bytes = [0xEF, 0xBB, 0xBF] + bytes
            return "prefix a byte order mark"
        default:
            bytes += random.pick([Array(" garbage".utf8), [0x00], Array("}".utf8), Array(",".utf8)])
            return "append bytes"
        }
    }
}

extension FuzzJSON {
    /// The node at `path`.
    subscript(path: [Int]) -> FuzzJSON {
        get {
            var node = self
            for index in path {
                switch node {
                case .object(let members): node = members[index].value
                case .array(let elements): node = elements[index]
                default: return node
                }
            }
            return node
        }
        set {
            guard let first = path.first else {
                self = newValue
                return
            }
            let rest = Array(path.dropFirst())
            switch self {
            case .object(var members):
                members[first].value[rest] = newValue
                self = .object(members)
            case .array(var elements):
                elements[first][rest] = newValue
                self = .array(elements)
            default:
                self = newValue
            }
        }
    }

    /// A short description for a report: the text, cut at 60 characters.
    var summary: String {
        let text = self.text
        return text.count > 60 ? String(text.prefix(60)) + "… (\(text.utf8.count) bytes)" : text
    }
}
