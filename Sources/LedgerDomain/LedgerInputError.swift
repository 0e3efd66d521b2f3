/// Input the ledger refuses before anything is written, with a message a caller can act on.
public struct LedgerInputError: Error, Hashable, Sendable, CustomStringConvertible {
    private enum Code: Hashable, Sendable {
        case invalidEventType
        case invalidStreamID
        case invalidJSON
        case nulCharacter
        case invalidDeduplicationKey
        case repeatedDeduplicationKey
        case emptyAppend
        case invalidDuration
        case invalidProduct
    }

    private let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func invalidEventType(_ value: String) -> Self {
        .init(.invalidEventType, "event type '\(value)' is not a name with a schema version such as 'PurchaseRecorded.v1' (letters and digits, then '.v' and a number from 1)")
    }

    public static func invalidStreamID(_ value: String) -> Self {
        .init(.invalidStreamID, "stream id '\(value)' is not valid: use 1 to 512 printable characters without spaces, e.g. 'user/com.example.app/42'")
    }

    public static func invalidJSON(field: String, reason: String) -> Self {
        .init(.invalidJSON, "\(field) must be a JSON object: \(reason)")
    }

    /// U+0000 in text: PostgreSQL stores it neither in `text` nor in `jsonb`.
    public static func nulCharacter(field: String) -> Self {
        .init(.nulCharacter, "\(field) must not contain the NUL character (\\u0000), which the ledger cannot store")
    }

    public static func invalidDeduplicationKey(_ reason: String) -> Self {
        .init(.invalidDeduplicationKey, "deduplication key is not valid: \(reason)")
    }

    public static func repeatedDeduplicationKey(_ key: String) -> Self {
        .init(.repeatedDeduplicationKey, "deduplication key '\(key)' appears twice in one append: send each transaction once")
    }

    public static var emptyAppend: Self {
        .init(.emptyAppend, "an append needs at least one event")
    }

    public static func invalidDuration(_ value: String) -> Self {
        .init(.invalidDuration, "duration '\(value)' is not an ISO 8601 length such as P7D, P1M, P2M, P3M, P6M or P1Y")
    }

    public static func invalidProduct(_ message: String) -> Self {
        .init(.invalidProduct, message)
    }

    public var description: String { message }
}
