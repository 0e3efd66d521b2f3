import LedgerDomain

/// Something the store could not do, with what to do about it.
///
/// Database errors never travel further than this type: callers branch on the code, and the HTTP
/// layer maps it to a status without showing SQL.
public struct StoreError: Error, Sendable, CustomStringConvertible {
    public enum Code: Sendable, Hashable {
        case wrongExpectedVersion
        case duplicateEventID
        case invalidInput
        case invalidDatabaseURL
        case databaseUnavailable
        case migrationEdited
        case migrationFailed
        case localServer
        case integrity
        /// The append met deduplication keys recorded in another stream and recorded nothing.
        case keyHeldByAnotherStream
    }

    public let code: Code
    public let message: String
    /// For `wrongExpectedVersion`: the stream, what the writer expected and what the stream was at.
    public let conflict: VersionConflict?
    /// For `keyHeldByAnotherStream`: the append's keys that another stream holds, and where.
    public let heldElsewhere: [DeduplicationKey: AppendResult.EventReference]

    public struct VersionConflict: Sendable, Hashable {
        public let streamID: String
        public let expected: String
        public let actual: Int64

        public init(streamID: String, expected: String, actual: Int64) {
            self.streamID = streamID
            self.expected = expected
            self.actual = actual
        }
    }

    private init(
        _ code: Code, _ message: String, conflict: VersionConflict? = nil,
        heldElsewhere: [DeduplicationKey: AppendResult.EventReference] = [:]
    ) {
        self.code = code
        self.message = message
        self.conflict = conflict
        self.heldElsewhere = heldElsewhere
    }

    public static func wrongExpectedVersion(stream: String, expected: String, actual: Int64) -> Self {
        .init(
            .wrongExpectedVersion,
            "stream '\(stream)' is at version \(actual), but the append expected \(expected): read the stream again and retry",
            conflict: VersionConflict(streamID: stream, expected: expected, actual: actual)
        )
    }

    public static func duplicateEventID(_ id: String) -> Self {
        .init(.duplicateEventID, "event id \(id) is already in the log: give every new event a new id")
    }

    /// A deduplication key belongs to the stream that recorded it first: an append to another
    /// stream that carries it is refused whole.
    public static func keyHeldByAnotherStream(stream: String, _ heldElsewhere: [DeduplicationKey: AppendResult.EventReference]) -> Self {
        .init(
            .keyHeldByAnotherStream,
            "stream '\(stream)': \(heldElsewhere.count) deduplication key(s) of the append are recorded in another stream; nothing was appended",
            heldElsewhere: heldElsewhere
        )
    }

    public static func invalidInput(_ message: String) -> Self { .init(.invalidInput, message) }
    public static func invalidDatabaseURL(_ reason: String) -> Self {
        .init(.invalidDatabaseURL, "LEDGER_DATABASE_URL is not usable: \(reason)")
    }
    public static func databaseUnavailable(_ message: String) -> Self { .init(.databaseUnavailable, message) }
    public static func migrationEdited(_ message: String) -> Self { .init(.migrationEdited, message) }
    public static func migrationFailed(_ message: String) -> Self { .init(.migrationFailed, message) }
    public static func localServer(_ message: String) -> Self { .init(.localServer, message) }
    public static func integrity(_ message: String) -> Self { .init(.integrity, message) }

    public var description: String { message }
}
