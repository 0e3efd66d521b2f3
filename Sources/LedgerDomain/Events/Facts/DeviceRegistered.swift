import Foundation

/// The first time a device id was seen for the user.
public struct DeviceRegistered: LedgerEvent {
    public static let typeName = try! EventTypeName("DeviceRegistered", version: 1)
    public let deviceId: String
}
