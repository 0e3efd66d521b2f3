/// The name of a stream: the unit of consistency of the log.
///
/// Six kinds of stream exist, and this type alone spells and parses their names:
/// `user/<bundle id>/<user id>`, one per (app, user) pair, which a command reads, decides on and
/// appends to with the version it read; `catalog/<bundle id>`, the app's product definitions;
/// `notifications/<bundle id>`, App Store notifications no user of the app held yet; and
/// `reports/<bundle id>`, Apple's sales reports received for the app; and `periods/<bundle id>`,
/// the periods finance closed and reopened; and `clock/<bundle id>`, the instants the ledger's clock
/// passed when something of the app's users ended by time alone (`ClockPassed`).
public struct StreamID: Hashable, Sendable, CustomStringConvertible {
    /// What a stream is about, parsed from its name.
    public enum Kind: Hashable, Sendable {
        case user(app: String, user: String)
        case catalog(app: String)
        case notifications(app: String)
        case reports(app: String)
        case periods(app: String)
        case clock(app: String)
    }

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
        try StreamID(userPrefix(app: bundleID) + userID)
    }

    /// The catalog stream of an app.
    public static func catalog(app bundleID: String) throws(LedgerInputError) -> StreamID {
        try StreamID(catalogPrefix + bundleID)
    }

    /// The app's notifications that no user held when they came.
    public static func notifications(app bundleID: String) throws(LedgerInputError) -> StreamID {
        try StreamID(notificationsPrefix + bundleID)
    }

    /// Apple's sales reports of the app.
    public static func reports(app bundleID: String) throws(LedgerInputError) -> StreamID {
        try StreamID(reportsPrefix + bundleID)
    }

    /// The periods finance closed (and reopened) for the app.
    public static func periods(app bundleID: String) throws(LedgerInputError) -> StreamID {
        try StreamID(periodsPrefix + bundleID)
    }

    /// The instants the ledger's clock passed for the app's users (`ClockPassed`).
    public static func clock(app bundleID: String) throws(LedgerInputError) -> StreamID {
        try StreamID(clockPrefix + bundleID)
    }

    /// What every user stream of the app starts with, for prefix scans of the log.
    public static func userPrefix(app bundleID: String) -> String {
        "\(userPrefix)\(bundleID)/"
    }

    private static let userPrefix = "user/"
    private static let catalogPrefix = "catalog/"
    private static let notificationsPrefix = "notifications/"
    private static let reportsPrefix = "reports/"
    private static let periodsPrefix = "periods/"
    private static let clockPrefix = "clock/"

    /// The kind of a stored stream name; nil for a name neither kind has.
    public static func kind(of rawValue: String) -> Kind? {
        if rawValue.hasPrefix(userPrefix) {
            let rest = rawValue.dropFirst(userPrefix.count)
            guard let slash = rest.firstIndex(of: "/") else { return nil }
            let app = String(rest[..<slash])
            let user = String(rest[rest.index(after: slash)...])
            return app.isEmpty || user.isEmpty ? nil : .user(app: app, user: user)
        }
        if rawValue.hasPrefix(catalogPrefix) {
            let app = String(rawValue.dropFirst(catalogPrefix.count))
            return app.isEmpty ? nil : .catalog(app: app)
        }
        if rawValue.hasPrefix(notificationsPrefix) {
            let app = String(rawValue.dropFirst(notificationsPrefix.count))
            return app.isEmpty ? nil : .notifications(app: app)
        }
        if rawValue.hasPrefix(reportsPrefix) {
            let app = String(rawValue.dropFirst(reportsPrefix.count))
            return app.isEmpty ? nil : .reports(app: app)
        }
        if rawValue.hasPrefix(periodsPrefix) {
            let app = String(rawValue.dropFirst(periodsPrefix.count))
            return app.isEmpty ? nil : .periods(app: app)
        }
        if rawValue.hasPrefix(clockPrefix) {
            let app = String(rawValue.dropFirst(clockPrefix.count))
            return app.isEmpty ? nil : .clock(app: app)
        }
        return nil
    }

    public var description: String { rawValue }
}
