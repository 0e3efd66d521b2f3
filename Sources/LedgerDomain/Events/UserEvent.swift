import Foundation

/// Any event of a user's stream (`user/<bundle id>/<user id>`), decoded from the log.
///
/// The stream holds facts (`Facts/`): what the App Store said, recorded as it said it, and what
/// the app reported. Nothing there is a judgement: whether a transaction is a purchase, a renewal,
/// a restore, an upgrade or a refund is decided by the fold (`TransactionClassifier`), so a fixed
/// rule and a replay change every past answer. `Version1/` holds the verdicts the first version
/// recorded, read through `TransactionFacts.upcast` and no longer written.
public enum UserEvent: Hashable, Sendable {
    case deviceRegistered(DeviceRegistered)
    case purchaseRecorded(PurchaseRecorded)
    case subscriptionRenewed(SubscriptionRenewed)
    case purchaseRestored(PurchaseRestored)
    case transactionFinished(TransactionFinished)
    case purchaseFailed(PurchaseFailed)
    case purchaseRevoked(PurchaseRevoked)
    case itemConsumed(ItemConsumed)
    case subscriptionRestoredToDevice(SubscriptionRestoredToDevice)
    case subscriptionExpiryReported(SubscriptionExpiryReported)
    case receiptPosted(ReceiptPosted)
    case appStoreTransactionObserved(AppStoreTransactionObserved)
    case renewalInfoObserved(RenewalInfoObserved)
    case appStoreNotificationReceived(AppStoreNotificationReceived)
    case appAccountTokenBound(AppAccountTokenBound)
    case consumptionConsentRecorded(ConsumptionConsentRecorded)
    case consumptionInformationSent(ConsumptionInformationSent)

    /// Decodes by stored type name; an unknown name is an error, never silently skipped.
    public init(type: String, data: String) throws {
        guard let decode = Self.decoders[type] else { throw UnknownEventType(type: type) }
        self = try decode(data)
    }

    /// The payload, to store or to encode.
    public var payload: any LedgerEvent {
        switch self {
        case .deviceRegistered(let event): event
        case .purchaseRecorded(let event): event
        case .subscriptionRenewed(let event): event
        case .purchaseRestored(let event): event
        case .transactionFinished(let event): event
        case .purchaseFailed(let event): event
        case .purchaseRevoked(let event): event
        case .itemConsumed(let event): event
        case .subscriptionRestoredToDevice(let event): event
        case .subscriptionExpiryReported(let event): event
        case .receiptPosted(let event): event
        case .appStoreTransactionObserved(let event): event
        case .renewalInfoObserved(let event): event
        case .appStoreNotificationReceived(let event): event
        case .appAccountTokenBound(let event): event
        case .consumptionConsentRecorded(let event): event
        case .consumptionInformationSent(let event): event
        }
    }

    /// Every event type a user's stream holds, by stored name, with the case it decodes into.
    /// A new event type is a case above, a line here, and what the fold (`UserLedger.apply`) makes of it.
    public static let types: [(name: EventTypeName, decode: @Sendable (String) throws -> UserEvent)] = [
        entry(DeviceRegistered.self, UserEvent.deviceRegistered),
        entry(PurchaseRecorded.self, UserEvent.purchaseRecorded),
        entry(SubscriptionRenewed.self, UserEvent.subscriptionRenewed),
        entry(PurchaseRestored.self, UserEvent.purchaseRestored),
        entry(TransactionFinished.self, UserEvent.transactionFinished),
        entry(PurchaseFailed.self, UserEvent.purchaseFailed),
        entry(PurchaseRevoked.self, UserEvent.purchaseRevoked),
        entry(ItemConsumed.self, UserEvent.itemConsumed),
        entry(SubscriptionRestoredToDevice.self, UserEvent.subscriptionRestoredToDevice),
        entry(SubscriptionExpiryReported.self, UserEvent.subscriptionExpiryReported),
        entry(ReceiptPosted.self, UserEvent.receiptPosted),
        entry(AppStoreTransactionObserved.self, UserEvent.appStoreTransactionObserved),
        entry(RenewalInfoObserved.self, UserEvent.renewalInfoObserved),
        entry(AppStoreNotificationReceived.self, UserEvent.appStoreNotificationReceived),
        entry(AppAccountTokenBound.self, UserEvent.appAccountTokenBound),
        entry(ConsumptionConsentRecorded.self, UserEvent.consumptionConsentRecorded),
        entry(ConsumptionInformationSent.self, UserEvent.consumptionInformationSent),
    ]

    private static let decoders = Dictionary(uniqueKeysWithValues: types.map { ($0.name.stored, $0.decode) })

    private static func entry<Event: LedgerEvent>(
        _ type: Event.Type, _ wrap: @escaping @Sendable (Event) -> UserEvent
    ) -> (name: EventTypeName, decode: @Sendable (String) throws -> UserEvent) {
        (Event.typeName, { wrap(try LedgerJSON.decode(Event.self, from: $0)) })
    }
}
