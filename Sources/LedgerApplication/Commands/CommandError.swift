import LedgerDomain

/// Refusals of the command layer that are not decisions of the user's own stream.
public struct CommandError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case ownedByAnotherUser = "owned_by_another_user"
        case commandKeyReused = "idempotency_key_reused"
    }

    public let code: Code
    public let message: String
    /// Where the conflicting fact is recorded (no user id: that is another user's business).
    public let position: Int64?

    public static func ownedByAnotherUser(position: Int64) -> Self {
        CommandError(
            code: .ownedByAnotherUser,
            message: "this App Store transaction is already recorded for another user of the app; nothing was recorded",
            position: position
        )
    }

    /// The command's idempotency key names a command recorded for another user of the app.
    public static func commandKeyReused(position: Int64) -> Self {
        CommandError(
            code: .commandKeyReused,
            message: "this Idempotency-Key was used for a command of another user; use a new key for a new command",
            position: position
        )
    }

    public var description: String { message }
}
