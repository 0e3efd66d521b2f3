/// The name of a stream: the unit of consistency of the log.
///
/// Every (app, user) pair has one stream, `user/<bundle id>/<user id>`; a command reads it,
/// decides, and appends with the version it read.
public struct StreamID: Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String

    public init(_ rawValue: String) throws(LedgerInputError) {
        guard !rawValue.isEmpty, rawValue.utf8.count <= 512,
              rawValue.unicodeScalars.allSatisfy({ !$0.properties.isWhitespace && $0.value >= 0x21 && $0.value != 0x7F })
        else {
            throw .invalidStreamID(rawValue)
        }
        self.rawValue = rawValue
    }

    /// The stream of one user of one app.
    public static func user(app bundleID: String, user userID: String) throws(LedgerInputError) -> StreamID {
        try StreamID("user/\(bundleID)/\(userID)")
    }

    public var description: String { rawValue }
}
