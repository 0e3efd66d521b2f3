import Foundation

// The facts recorded on a user's stream (`user/<bundle id>/<user id>`).

/// The first time a device id was seen for the user.
public struct DeviceRegistered: LedgerEvent {
    public static let typeName = try! EventTypeName("DeviceRegistered", version: 1)
    public let deviceId: String

    public init(deviceId: String) {
        self.deviceId = deviceId
    }
}

/// Version 1 (written before facts were recorded, no longer written): a verified payment
/// transaction as the ledger then judged it at ingest. Read through `TransactionFacts.upcast`.
public struct PurchaseRecorded: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRecorded", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    /// As the catalog said when it was recorded; `unknown` when the catalog did not know it.
    public let productType: ProductType
    public let quantity: Int
    public let purchaseDate: Date
    /// Auto-renewable subscriptions only: when the period this payment bought ends.
    public let expiresDate: Date?
    public let environment: StoreEnvironment
    public let deviceId: String
    /// Decimal text and ISO 4217 code, as the device's product info said; absent when unknown.
    public let price: String?
    public let currency: String?
    /// SHA-256 (hex) of the receipt the App Store verified.
    public let receiptHash: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String, productType: ProductType,
        quantity: Int, purchaseDate: Date, expiresDate: Date? = nil, environment: StoreEnvironment,
        deviceId: String, price: String? = nil, currency: String? = nil, receiptHash: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.environment = environment
        self.deviceId = deviceId
        self.price = price
        self.currency = currency
        self.receiptHash = receiptHash
    }
}

/// Version 1 (no longer written): an auto-renewable renewal as judged at ingest. Read through the upcaster.
public struct SubscriptionRenewed: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionRenewed", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let purchaseDate: Date
    public let expiresDate: Date
    public let environment: StoreEnvironment
    public let price: String?
    public let currency: String?
    public let receiptHash: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String, purchaseDate: Date,
        expiresDate: Date, environment: StoreEnvironment, price: String? = nil, currency: String? = nil,
        receiptHash: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.environment = environment
        self.price = price
        self.currency = currency
        self.receiptHash = receiptHash
    }
}

/// Version 1 (no longer written): a restore as judged at ingest (`originalTransactionId` is the
/// purchase the ledger pointed it at). Read through the upcaster.
public struct PurchaseRestored: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRestored", version: 1)
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let deviceId: String
    public let purchaseDate: Date
    public let environment: StoreEnvironment
    public let receiptHash: String

    public init(
        transactionId: String, originalTransactionId: String, productId: String, deviceId: String,
        purchaseDate: Date, environment: StoreEnvironment, receiptHash: String
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.deviceId = deviceId
        self.purchaseDate = purchaseDate
        self.environment = environment
        self.receiptHash = receiptHash
    }
}

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

/// A payment failed or was cancelled on the device. No money, no ownership; kept for support.
public struct PurchaseFailed: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseFailed", version: 1)
    public let productId: String
    public let deviceId: String
    public let errorCode: String
    public let cancelled: Bool

    public init(productId: String, deviceId: String, errorCode: String, cancelled: Bool) {
        self.productId = productId
        self.deviceId = deviceId
        self.errorCode = errorCode
        self.cancelled = cancelled
    }
}

/// A revocation by support (and, in logs written before facts were recorded, a refund the
/// App Store reported): what the transaction gave is taken back.
public struct PurchaseRevoked: LedgerEvent {
    public static let typeName = try! EventTypeName("PurchaseRevoked", version: 1)
    public let transactionId: String
    public let revokedAt: Date
    public let reason: String

    public init(transactionId: String, revokedAt: Date, reason: String) {
        self.transactionId = transactionId
        self.revokedAt = revokedAt
        self.reason = reason
    }
}

/// No longer written (a 21006 answer is now an `AppStoreTransactionObserved` with status 21006):
/// the App Store answered status 21006 ("valid but the subscription has expired") for a receipt
/// holding this auto-renewable transaction, at `reportedAt`. What it means is the fold's to judge (an answer before the period's expiry is how Apple
/// reports a subscription support cancelled, so the period then ends at `reportedAt`). No money moved.
public struct SubscriptionExpiryReported: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionExpiryReported", version: 1)
    public let transactionId: String
    public let reportedAt: Date
    /// The App Store's status, 21006.
    public let status: Int

    public init(transactionId: String, reportedAt: Date, status: Int) {
        self.transactionId = transactionId
        self.reportedAt = reportedAt
        self.status = status
    }
}

/// The app used up some of a consumable.
public struct ItemConsumed: LedgerEvent {
    public static let typeName = try! EventTypeName("ItemConsumed", version: 1)
    public let productId: String
    public let quantity: Int
    public let deviceId: String

    public init(productId: String, quantity: Int, deviceId: String) {
        self.productId = productId
        self.quantity = quantity
        self.deviceId = deviceId
    }
}

/// The ledger restored the user's non-renewing subscription periods to a device (the App Store
/// does not restore them itself).
public struct SubscriptionRestoredToDevice: LedgerEvent {
    public static let typeName = try! EventTypeName("SubscriptionRestoredToDevice", version: 1)
    public let deviceId: String
    public let transactionIds: [String]

    public init(deviceId: String, transactionIds: [String]) {
        self.deviceId = deviceId
        self.transactionIds = transactionIds
    }
}

/// Any event of a user's stream, decoded from the log.
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
    ]

    private static let decoders = Dictionary(uniqueKeysWithValues: types.map { ($0.name.stored, $0.decode) })

    private static func entry<Event: LedgerEvent>(
        _ type: Event.Type, _ wrap: @escaping @Sendable (Event) -> UserEvent
    ) -> (name: EventTypeName, decode: @Sendable (String) throws -> UserEvent) {
        (Event.typeName, { wrap(try LedgerJSON.decode(Event.self, from: $0)) })
    }
}

/// A stored event type this code does not know: a projection stops on it rather than skip it.
public struct UnknownEventType: Error, Hashable, Sendable, CustomStringConvertible {
    public let type: String

    public init(type: String) {
        self.type = type
    }

    public var description: String {
        "event type '\(type)' is not known to this version of the ledger: upgrade it before replaying this log"
    }
}
