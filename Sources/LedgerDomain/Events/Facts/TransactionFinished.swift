import Foundation

/// The device called finishTransaction after delivering the content.
public struct TransactionFinished: LedgerEvent {
    public static let typeName = try! EventTypeName("TransactionFinished", version: 1)
    public let transactionId: String
    public let deviceId: String

    public init(transactionId: String, deviceId: String) {
        self.transactionId = transactionId
        self.deviceId = deviceId
    }
}
