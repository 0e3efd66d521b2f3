import LedgerDomain

/// What is sent to `verifyReceipt`: the receipt as the device gave it and, for auto-renewables, the app's secret.
public struct ReceiptVerificationRequest: Sendable, CustomStringConvertible {
    /// The base64 receipt exactly as received from the device; its SHA-256 identifies the receipt in the ledger.
    public var receiptData: String
    /// The app's shared secret, from configuration; required by the App Store for receipts with auto-renewables.
    public var sharedSecret: SharedSecret?
    /// Ask for only the latest renewal of each subscription in `latest_receipt_info` (app receipts only).
    public var excludeOldTransactions: Bool
    /// The environment asked first. Production unless the caller knows the receipt comes from a
    /// sandbox build; a wrong guess costs one extra request (21007 or 21008), never a wrong answer.
    public var firstEnvironment: StoreEnvironment

    public init(
        receiptData: String,
        sharedSecret: SharedSecret? = nil,
        excludeOldTransactions: Bool = false,
        firstEnvironment: StoreEnvironment = .production
    ) {
        self.receiptData = receiptData
        self.sharedSecret = sharedSecret
        self.excludeOldTransactions = excludeOldTransactions
        self.firstEnvironment = firstEnvironment
    }

    public var description: String {
        "ReceiptVerificationRequest(receiptData: \(receiptData.utf8.count) bytes, sharedSecret: \(sharedSecret == nil ? "none" : "<redacted>"), excludeOldTransactions: \(excludeOldTransactions))"
    }
}
