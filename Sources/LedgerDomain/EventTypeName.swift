/// The stored name of an event type: a past-tense name and a schema version, `PurchaseRecorded.v1`.
///
/// The version is part of the stored name so that a changed payload gets a new name and old
/// events keep decoding as what they were.
public struct EventTypeName: Hashable, Sendable, CustomStringConvertible {
    public let name: String
    public let version: Int

    public init(_ name: String, version: Int) throws(LedgerInputError) {
        guard let first = name.unicodeScalars.first, first.properties.isAlphabetic, first.isASCII,
              name.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0)) })
        else {
            throw .invalidEventType(name)
        }
        guard version >= 1 else { throw .invalidEventType("\(name).v\(version)") }
        self.name = name
        self.version = version
    }

    /// Parses a stored name such as `PurchaseRecorded.v1`.
    public init(stored: String) throws(LedgerInputError) {
        guard let dot = stored.lastIndex(of: "."),
              stored[stored.index(after: dot)...].hasPrefix("v"),
              let version = Int(stored[stored.index(dot, offsetBy: 2)...])
        else {
            throw .invalidEventType(stored)
        }
        try self.init(String(stored[..<dot]), version: version)
    }

    /// The name as stored in `ledger.events.event_type`.
    public var stored: String { "\(name).v\(version)" }

    public var description: String { stored }
}
