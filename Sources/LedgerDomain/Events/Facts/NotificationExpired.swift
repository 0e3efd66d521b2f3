import Foundation

/// A notification waited on the app's notifications stream past its time with no user taking it
/// (no post of its transaction, no user bound to its token). Recorded on that stream, once per
/// notification; the notification stays where it is, and a later post of its transaction still
/// takes it. Operators list these (`ledger notifications list --expired`).
public struct NotificationExpired: LedgerEvent {
    public static let typeName = try! EventTypeName("NotificationExpired", version: 1)
    public let notificationUUID: String
    /// When it was recorded, waiting.
    public let waitingSince: Date

    public init(notificationUUID: String, waitingSince: Date) {
        self.notificationUUID = notificationUUID
        self.waitingSince = waitingSince
    }
}
