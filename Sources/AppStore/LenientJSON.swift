import Foundation

/// A forgiving read-only view of `JSONSerialization` output, for answers whose types drift.
///
/// The App Store sends numbers and booleans as strings (`"quantity":"1"`, `"is_trial_period":"false"`)
/// in some places and as JSON numbers in others, adds keys over the years and leaves optional ones out.
/// Every accessor answers `nil` for a missing key or a value it cannot read, instead of failing the
/// whole receipt; the caller decides which fields are required.
public struct LenientJSON {
    /// The parsed value: a dictionary, array, string, number, boolean, `NSNull` or nothing.
    public let raw: Any?

    public init(_ raw: Any?) {
        self.raw = raw
    }

    /// Parses `data`; `nil` when it is not JSON at all.
    public init?(data: Data) {
        guard let value = try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]) else {
            return nil
        }
        self.raw = value
    }

    public subscript(key: String) -> LenientJSON {
        LenientJSON((raw as? [String: Any])?[key])
    }

    public var isPresent: Bool {
        raw != nil && !(raw is NSNull)
    }

    public var object: [String: Any]? { raw as? [String: Any] }

    /// The elements of an array; `nil` when the value is not an array.
    public var array: [LenientJSON]? {
        (raw as? [Any]).map { $0.map(LenientJSON.init) }
    }

    /// A string, or the plain text of a number or boolean; empty strings count as missing.
    public var string: String? {
        switch raw {
        case let text as String:
            return text.isEmpty ? nil : text
        case let flag as Bool where Self.isBoolean(raw):
            return flag ? "true" : "false"
        case let number as NSNumber:
            let double = number.doubleValue
            if double.rounded() == double, abs(double) < 9.0e18 { return String(number.int64Value) }
            return String(double)
        default:
            return nil
        }
    }

    /// An integer from a number or from a string of digits (`"1"`, `" 2 "`).
    public var int64: Int64? {
        switch raw {
        case let text as String:
            return Int64(text.trimmingCharacters(in: .whitespaces))
        case _ where Self.isBoolean(raw):
            return nil
        case let number as NSNumber:
            let double = number.doubleValue
            guard double.rounded() == double, abs(double) < 9.0e18 else { return nil }
            return number.int64Value
        default:
            return nil
        }
    }

    public var int: Int? { int64.flatMap { Int(exactly: $0) } }

    /// A boolean from `true`/`false`, `"true"`/`"false"`, `"1"`/`"0"`, `"yes"`/`"no"` or a number.
    public var bool: Bool? {
        switch raw {
        case let text as String:
            switch text.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "1", "yes": return true
            case "false", "0", "no": return false
            default: return nil
            }
        case let flag as Bool where Self.isBoolean(raw):
            return flag
        case let number as NSNumber:
            return number.doubleValue != 0
        default:
            return nil
        }
    }

    /// The date stored under `key`, in the forms the App Store uses; see `AppStoreDate`.
    public func date(_ key: String) -> Date? {
        AppStoreDate.read(key, in: self)
    }

    /// Whether `value` is a JSON boolean rather than a number that happens to bridge to `Bool`.
    ///
    /// Foundation parses `true`/`false` into a private `NSNumber` subclass on every platform, and a plain
    /// `1` also casts to `Bool`, so the class is what tells them apart.
    private static func isBoolean(_ value: Any?) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return ObjectIdentifier(type(of: number)) == booleanClass
    }

    private static let booleanClass = ObjectIdentifier(type(of: NSNumber(value: true)))
}
