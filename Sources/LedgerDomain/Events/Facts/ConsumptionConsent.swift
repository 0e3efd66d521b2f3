import Foundation

/// The app reported whether the user consented to the ledger telling Apple how they used what
/// they bought, when they ask Apple for a refund (Send Consumption Information needs it, and Apple
/// wants it withdrawn as soon as the user withdraws it). The latest one holds.
public struct ConsumptionConsentRecorded: LedgerEvent {
    public static let typeName = try! EventTypeName("ConsumptionConsentRecorded", version: 1)
    public let consented: Bool

    public init(consented: Bool) {
        self.consented = consented
    }
}

/// What the ledger told Apple about a refund request (Send Consumption Information), and whether
/// Apple took it (202) or refused it (with its error); sent once per CONSUMPTION_REQUEST.
public struct ConsumptionInformationSent: LedgerEvent {
    public static let typeName = try! EventTypeName("ConsumptionInformationSent", version: 1)
    public let notificationUUID: String
    public let transactionId: String
    public let deliveryStatus: String
    public let sampleContentProvided: Bool
    public let consumptionPercentage: Int?
    public let refundPreference: String?
    /// Apple answered 202.
    public let accepted: Bool
    /// Apple's refusal, when it refused.
    public let detail: String?

    public init(
        notificationUUID: String, transactionId: String, deliveryStatus: String, sampleContentProvided: Bool, consumptionPercentage: Int?,
        refundPreference: String?, accepted: Bool, detail: String?
    ) {
        self.notificationUUID = notificationUUID
        self.transactionId = transactionId
        self.deliveryStatus = deliveryStatus
        self.sampleContentProvided = sampleContentProvided
        self.consumptionPercentage = consumptionPercentage
        self.refundPreference = refundPreference
        self.accepted = accepted
        self.detail = detail
    }
}
