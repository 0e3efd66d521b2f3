import Foundation

/// The app used up some of a consumable.
public struct ItemConsumed: LedgerEvent {
    public static let typeName = try! EventTypeName("ItemConsumed", version: 1)
    public let productId: String
    public let quantity: Int
    public let deviceId: String
}
