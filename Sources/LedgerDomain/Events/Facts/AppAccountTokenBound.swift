import Foundation

/// The app's server bound an `appAccountToken` (the UUID an app gives StoreKit with a purchase)
/// to this user: App Store notifications that carry it, and whose transaction no user holds, are
/// the user's. One token is bound to one user of the app, for ever (its deduplication key).
public struct AppAccountTokenBound: LedgerEvent {
    public static let typeName = try! EventTypeName("AppAccountTokenBound", version: 1)
    /// Lower-case, as `AppAccountToken.normalized` writes it.
    public let token: String

    public init(token: String) {
        self.token = token
    }
}

/// An App Store `appAccountToken`: a UUID, compared in lower case (Apple's payloads write it so).
public enum AppAccountToken {
    /// The token in lower case, or nil when `text` is not a UUID.
    public static func normalized(_ text: String) -> String? {
        UUID(uuidString: text).map { $0.uuidString.lowercased() }
    }
}
