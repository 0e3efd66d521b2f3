/// Refusals of closing and reopening periods, with what to do about them.
public struct PeriodError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        /// The period is closed already (409).
        case periodClosed = "period_closed"
        /// The period is not closed: nothing to reopen (409).
        case periodNotClosed = "period_not_closed"
        /// The period has not ended (409).
        case periodNotEnded = "period_not_ended"
        /// The period was never closed: no figures were frozen, nothing is adjusted (404).
        case periodNeverClosed = "period_never_closed"
        /// This server has no anchor key to sign a close with (409).
        case noSigningKey = "no_signing_key"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
