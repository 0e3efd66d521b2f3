import AppStore
import Foundation
import LedgerDomain

/// A transaction as the simulator keeps it: the App Store's side of one payment, renewal or restore.
public struct SimulatorTransaction: Codable, Hashable, Sendable {
    /// The receipt's `in_app_ownership_type`.
    public enum Ownership: String, Codable, Hashable, Sendable {
        /// The user bought it.
        case purchased = "PURCHASED"
        /// A family member bought it and shares it with the user.
        case familyShared = "FAMILY_SHARED"
    }

    public let transactionId: String
    public let originalTransactionId: String
    public let userId: String
    public let bundleId: String
    public let productId: String
    public let productType: ProductType
    public let quantity: Int
    public let purchaseDate: Date
    public let originalPurchaseDate: Date
    /// Auto-renewables only: the end of the period this transaction paid for.
    public let expiresDate: Date?
    public let webOrderLineItemId: String?
    /// Set when support cancels (refunds) the transaction, or when an upgrade ends its period early.
    public internal(set) var cancellationDate: Date?
    /// Set by support only: an upgrade cancels without a reason.
    public internal(set) var cancellationReason: Int?
    /// A prorated refund: the share refunded, in milliunits of a percent (40000 = 40 %); nil for a
    /// full refund. Signed views say it as `revocationType` REFUND_PRORATED and `revocationPercentage`;
    /// receipts, as Apple's, say only that it was cancelled.
    public internal(set) var revocationPercentage: Int?
    public let ownership: Ownership
    /// Auto-renewables only: the receipt's `subscription_group_identifier`.
    public let subscriptionGroupIdentifier: String?
    /// A period of a free trial.
    public let isTrialPeriod: Bool
    /// A period at the price of a pay-as-you-go or pay-up-front introductory offer.
    public let isInIntroOfferPeriod: Bool
    /// The period was cut short by an upgrade, at `cancellationDate`.
    public internal(set) var isUpgraded: Bool
    /// A restore: the transaction it restores (the payment of the same period, or the original purchase).
    public let restoredTransactionId: String?
    /// A family member's copy: the buyer's transaction it shares.
    public let sharedTransactionId: String?
    /// When the app finished the transaction; a finished consumable leaves later receipts.
    public internal(set) var finishedAt: Date?
    /// The buyer's App Store country (ISO 3166-1 alpha-3), as StoreKit's `storefront` says it: the
    /// user's, set when the simulator records the transaction.
    public internal(set) var storefront = "USA"

    init(
        transactionId: String,
        originalTransactionId: String,
        userId: String,
        bundleId: String,
        productId: String,
        productType: ProductType,
        quantity: Int,
        purchaseDate: Date,
        originalPurchaseDate: Date,
        expiresDate: Date?,
        webOrderLineItemId: String?,
        cancellationDate: Date? = nil,
        cancellationReason: Int? = nil,
        ownership: Ownership = .purchased,
        subscriptionGroupIdentifier: String? = nil,
        isTrialPeriod: Bool = false,
        isInIntroOfferPeriod: Bool = false,
        isUpgraded: Bool = false,
        restoredTransactionId: String? = nil,
        sharedTransactionId: String? = nil
    ) {
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.userId = userId
        self.bundleId = bundleId
        self.productId = productId
        self.productType = productType
        self.quantity = quantity
        self.purchaseDate = purchaseDate
        self.originalPurchaseDate = originalPurchaseDate
        self.expiresDate = expiresDate
        self.webOrderLineItemId = webOrderLineItemId
        self.cancellationDate = cancellationDate
        self.cancellationReason = cancellationReason
        self.ownership = ownership
        self.subscriptionGroupIdentifier = subscriptionGroupIdentifier
        self.isTrialPeriod = isTrialPeriod
        self.isInIntroOfferPeriod = isInIntroOfferPeriod
        self.isUpgraded = isUpgraded
        self.restoredTransactionId = restoredTransactionId
        self.sharedTransactionId = sharedTransactionId
        self.finishedAt = nil
    }

    /// Refunded by support (an upgrade's cancellation is not a refund).
    var isRefunded: Bool { cancellationDate != nil && !isUpgraded }

    /// A payment of the App Store's: neither a restore nor a family member's copy.
    var isPayment: Bool { restoredTransactionId == nil && sharedTransactionId == nil }

    /// Finished consumables are left out of receipts issued afterwards, as the App Store does.
    var leavesReceipts: Bool { productType == .consumable && finishedAt != nil }
}
