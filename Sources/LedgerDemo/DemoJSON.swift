import Foundation

/// A JSON value as the demo sends and receives it: `Sendable`, so that story results can cross tasks,
/// with lookups that answer `nil` instead of trapping when the shape is not what was expected.
public enum DemoJSON: Sendable, Hashable, Codable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([DemoJSON])
    case object([String: DemoJSON])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([DemoJSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: DemoJSON].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            // Whole numbers (positions, balances, quantities) are written without a fraction.
            if value.rounded() == value, abs(value) < 1e15 { try container.encode(Int64(value)) } else { try container.encode(value) }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// Parses a response body; a body that is not JSON becomes `.string` of its text.
    public init(data: Data) {
        if data.isEmpty {
            self = .null
        } else if let value = try? JSONDecoder().decode(DemoJSON.self, from: data) {
            self = value
        } else {
            self = .string(String(decoding: data, as: UTF8.self))
        }
    }

    public subscript(key: String) -> DemoJSON? {
        if case .object(let members) = self { return members[key] }
        return nil
    }

    public subscript(index: Int) -> DemoJSON? {
        if case .array(let items) = self, items.indices.contains(index) { return items[index] }
        return nil
    }

    public var string: String? { if case .string(let value) = self { return value }; return nil }
    public var int: Int? { if case .number(let value) = self, value.rounded() == value { return Int(value) }; return nil }
    public var bool: Bool? { if case .bool(let value) = self { return value }; return nil }
    public var array: [DemoJSON] { if case .array(let items) = self { return items }; return [] }

    /// Compact JSON with sorted keys, as printed by the demo.
    public var description: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(self)).map { String(decoding: $0, as: UTF8.self) } ?? "null"
    }

    /// The JSON bytes, for a request body.
    var data: Data { Data(description.utf8) }
}

extension DemoJSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(dictionaryLiteral elements: (String, DemoJSON)...) {
        self = .object(Dictionary(elements, uniquingKeysWith: { _, last in last }))
    }
    public init(arrayLiteral elements: DemoJSON...) { self = .array(elements) }
}
