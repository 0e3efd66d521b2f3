/// Refusals of app and key administration, with what to do about them.
public struct AccessError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case unknownApp = "unknown_app"
        case unknownKey = "unknown_key"
        case invalidInput = "invalid_input"
    }

    public let code: Code
    public let message: String

    public static func unknownApp(_ bundleID: String) -> Self {
        AccessError(code: .unknownApp, message: "app \(bundleID) is not registered; register it with `ledger apps add \(bundleID)`")
    }

    public static func unknownKey(_ keyID: String) -> Self {
        AccessError(code: .unknownKey, message: "there is no API key \(keyID); `ledger keys list` shows the keys")
    }

    public static func invalidInput(_ message: String) -> Self {
        AccessError(code: .invalidInput, message: message)
    }

    public var description: String { message }
}
