import Foundation

/// Where Apple's sales reports come from without a person downloading them: the App Store Connect
/// API (`AppStoreConnectReports` in the `AppStore` module).
public protocol SalesReportSource: Sendable {
    /// Apple's Summary Sales Report of one reporting day (`yyyy-MM-dd`) for the app's vendor,
    /// parsed; a report with no lines when Apple says the day had no sales. Throws
    /// `SalesReportFetchError` for what Apple refused or could not give.
    func summarySalesReport(day: String) async throws -> ReceivedSalesReport
}

/// An app's App Store Connect API key, and the vendor number its reports are filed under.
public struct AppStoreConnectKey: Sendable, Hashable {
    public let keyID: String
    public let issuerID: String
    public let privateKeyPEM: String
    public let vendorNumber: String

    public init(keyID: String, issuerID: String, privateKeyPEM: String, vendorNumber: String) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.privateKeyPEM = privateKeyPEM
        self.vendorNumber = vendorNumber
    }
}

/// What App Store Connect would not give, with what to do about it.
public struct SalesReportFetchError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case refused
        case notAvailable = "not_available"
        case rateLimited = "rate_limited"
        case unavailable
        case malformed
    }

    public let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func refused(_ message: String) -> Self { .init(.refused, message) }
    public static func notAvailable(_ message: String) -> Self { .init(.notAvailable, message) }
    public static func rateLimited(_ message: String) -> Self { .init(.rateLimited, message) }
    public static func unavailable(_ message: String) -> Self { .init(.unavailable, message) }
    public static func malformed(_ message: String) -> Self { .init(.malformed, message) }

    public var description: String { message }
}
