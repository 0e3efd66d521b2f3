import Foundation

/// Reads the fields of a transaction or a renewal-info entry as the App Store wrote them, in
/// either of its two namings: verifyReceipt's (`transaction_id`, `purchase_date_ms`, …) and the
/// signed payloads' of StoreKit 2 and Server Notifications V2 (`transactionId`, `purchaseDate` in
/// milliseconds, `revocationDate`, `price` in milliunits, …). Both are recorded verbatim; the
/// properties below mean the same whichever naming a fact has.
///
/// Dates come from the `*_ms` field (milliseconds since 1970) when there is one; flags are
/// `"true"`/`"1"`. Reading is lenient about shape and strict about meaning: a field that is there
/// but unreadable counts as absent, and the raw text stays in the log for a later fix.
public struct AppStoreFields: Hashable, Sendable {
    public let values: [String: String]

    /// The transaction fields below, read once here: the classifier reads them for every
    /// transaction of a user on every fold, and reading them from `values` each time was a large
    /// part of its cost.
    public init(_ values: [String: String]) {
        if values["transactionId"] != nil || values["originalTransactionId"] != nil {
            self = AppStoreFields(signed: values)
            return
        }
        self.values = values
        isSigned = false
        transactionId = Self.text(values, "transaction_id")
        originalTransactionId = Self.text(values, "original_transaction_id")
        productId = Self.text(values, "product_id")
        quantity = max(Self.text(values, "quantity").flatMap { Int($0) } ?? 1, 1)
        purchaseDate = Self.date(values, "purchase_date")
        expiresDate = Self.date(values, "expires_date")
        cancellationDate = Self.date(values, "cancellation_date")
        cancellationReason = Self.text(values, "cancellation_reason").flatMap { Int($0) }
        webOrderLineItemId = Self.text(values, "web_order_line_item_id")
        isTrialPeriod = Self.flag(values, "is_trial_period")
        isInIntroOfferPeriod = Self.flag(values, "is_in_intro_offer_period")
        isUpgraded = Self.flag(values, "is_upgraded")
        isFamilyShared = Self.text(values, "in_app_ownership_type") == "FAMILY_SHARED"
        price = nil
        appStoreProductType = nil
        signedDate = nil
        isInBillingRetry = Self.flag(values, "is_in_billing_retry_period")
        gracePeriodExpiresDate = Self.date(values, "grace_period_expires_date")
        originalPurchaseDate = Self.date(values, "original_purchase_date")
        // verifyReceipt says neither how much of a refund was refunded nor where the buyer is.
        revocationType = nil
        revocationPercentage = nil
        storefront = nil
        storefrontId = nil
    }

    /// A signed payload's naming (`JWSTransactionDecodedPayload`, `JWSRenewalInfoDecodedPayload`):
    /// dates are milliseconds, `revocationDate` and `revocationReason` say what verifyReceipt's
    /// `cancellation_*` said, an introductory offer is `offerType` 1 (a free trial when its
    /// `offerDiscountType` is FREE_TRIAL, or when it cost nothing).
    private init(signed values: [String: String]) {
        self.values = values
        isSigned = true
        transactionId = Self.text(values, "transactionId")
        originalTransactionId = Self.text(values, "originalTransactionId")
        productId = Self.text(values, "productId")
        quantity = max(Self.text(values, "quantity").flatMap { Int($0) } ?? 1, 1)
        purchaseDate = Self.milliseconds(values, "purchaseDate")
        expiresDate = Self.milliseconds(values, "expiresDate")
        cancellationDate = Self.milliseconds(values, "revocationDate")
        cancellationReason = Self.text(values, "revocationReason").flatMap { Int($0) }
        webOrderLineItemId = Self.text(values, "webOrderLineItemId")
        // An ISO 4217 code or nothing: a signed field the ledger does not recognise as a currency
        // prices nothing (it stays in the fields as it came) rather than reach finance's CSV.
        let currency = Self.text(values, "currency").flatMap { $0.utf8.count == 3 && $0.utf8.allSatisfy { (65...90).contains($0) } ? $0 : nil }
        price = Self.text(values, "price").flatMap(Self.decimal(milliunits:)).flatMap { amount in currency.map { (amount, $0) } }
            .map { AppStorePrice(amount: $0.0, currency: $0.1) }
        let introductory = Self.text(values, "offerType") == "1"
        isTrialPeriod = introductory && (Self.text(values, "offerDiscountType") == "FREE_TRIAL" || price.map { Decimal(string: $0.amount) == 0 } == true)
        isInIntroOfferPeriod = introductory
        isUpgraded = Self.flag(values, "isUpgraded")
        isFamilyShared = Self.text(values, "inAppOwnershipType") == "FAMILY_SHARED"
        appStoreProductType = Self.text(values, "type").flatMap(Self.productType(named:))
        signedDate = Self.milliseconds(values, "signedDate")
        isInBillingRetry = Self.flag(values, "isInBillingRetryPeriod")
        gracePeriodExpiresDate = Self.milliseconds(values, "gracePeriodExpiresDate")
        originalPurchaseDate = Self.milliseconds(values, "originalPurchaseDate")
        revocationType = Self.text(values, "revocationType")
        revocationPercentage = Self.text(values, "revocationPercentage").flatMap { Int($0) }
        storefront = Self.text(values, "storefront")
        storefrontId = Self.text(values, "storefrontId")
    }

    private static func milliseconds(_ values: [String: String], _ key: String) -> Date? {
        text(values, key).flatMap(Int64.init).flatMap(Date.init(recordableMilliseconds:))
    }

    /// Apple's milliunits (990 for 0.99) as a decimal text without trailing zeros ("0.99", "120").
    static func decimal(milliunits text: String) -> String? {
        guard let value = Int64(text), value > Int64.min else { return nil }
        let magnitude = value.magnitude
        var fraction = String(magnitude % 1000)
        fraction = String(repeating: "0", count: 3 - fraction.count) + fraction
        while fraction.hasSuffix("0") { fraction.removeLast() }
        let whole = "\(value < 0 ? "-" : "")\(magnitude / 1000)"
        return fraction.isEmpty ? whole : "\(whole).\(fraction)"
    }

    /// The product type a signed transaction's `type` names.
    static func productType(named name: String) -> ProductType? {
        switch name {
        case "Auto-Renewable Subscription": .autoRenewable
        case "Non-Renewing Subscription": .nonRenewing
        case "Consumable": .consumable
        case "Non-Consumable": .nonConsumable
        default: nil
        }
    }

    private static func text(_ values: [String: String], _ key: String) -> String? {
        guard let value = values[key], !value.isEmpty else { return nil }
        return value
    }

    private static func date(_ values: [String: String], _ key: String) -> Date? {
        if let milliseconds = text(values, "\(key)_ms").flatMap(Int64.init), let date = Date(recordableMilliseconds: milliseconds) { return date }
        return text(values, key).flatMap(parseAppleDate)
    }

    private static func flag(_ values: [String: String], _ key: String) -> Bool {
        guard let value = text(values, key)?.lowercased() else { return false }
        return value == "true" || value == "1"
    }

    public subscript(key: String) -> String? {
        Self.text(values, key)
    }

    /// Milliseconds win; dates the ledger cannot record (`Date.recordableMilliseconds`) are unreadable.
    public func date(_ key: String) -> Date? {
        Self.date(values, key)
    }

    public func flag(_ key: String) -> Bool {
        Self.flag(values, key)
    }

    public func int(_ key: String) -> Int? {
        self[key].flatMap { Int($0) }
    }

    // MARK: Transaction fields

    public let transactionId: String?
    public let originalTransactionId: String?
    public let productId: String?
    public let quantity: Int
    public let purchaseDate: Date?
    public let expiresDate: Date?
    public let cancellationDate: Date?
    /// "1": the customer cited a problem with the app; "0": another reason.
    public let cancellationReason: Int?
    public let webOrderLineItemId: String?
    public let isTrialPeriod: Bool
    public let isInIntroOfferPeriod: Bool
    public let isUpgraded: Bool
    /// `FAMILY_SHARED` when a family member's purchase gives the user access.
    public let isFamilyShared: Bool
    /// Whether the fields are a signed payload's (StoreKit 2, Server Notifications V2).
    public let isSigned: Bool
    /// Signed payloads only: what the customer paid for the whole quantity, as Apple reports it
    /// (`price`, `currency`: Apple's `price` is the transaction's total, not a unit price).
    public let price: AppStorePrice?
    /// Signed payloads only: the product type Apple names (`type`).
    public let appStoreProductType: ProductType?
    /// Signed payloads only: when Apple signed them.
    public let signedDate: Date?
    /// Renewal info: the App Store is still trying to bill the renewal.
    public let isInBillingRetry: Bool
    /// Renewal info: while billing is retried, the customer keeps access until then (a billing grace period).
    public let gracePeriodExpiresDate: Date?
    /// When the original transaction was bought (`original_purchase_date`, `originalPurchaseDate`).
    public let originalPurchaseDate: Date?
    /// Signed payloads only: how a refund revoked the transaction: `REFUND_FULL`,
    /// `REFUND_PRORATED` (then `revocationPercentage` says how much) or `FAMILY_REVOKE`.
    public let revocationType: String?
    /// Signed payloads only: the refunded share of the whole quantity, in milliunits of a percent
    /// (40000 is 40 %), with `REFUND_PRORATED`.
    public let revocationPercentage: Int?
    /// Signed payloads only: the buyer's App Store country (ISO 3166-1 alpha-3) and Apple's id of it.
    public let storefront: String?
    public let storefrontId: String?

    /// Fields a signed payload gives anew each time it is signed, or per device, without any
    /// change to the transaction: a payload differing from another only in these says the same.
    public static let volatileSignedKeys: Set<String> = ["signedDate", "deviceVerification", "deviceVerificationNonce"]

    /// Whether `other` says the same of the transaction. Within one naming every field counts
    /// (bar the volatile ones of a signed payload); across namings (a receipt's view and a signed
    /// view of one transaction) what both can say: ids, product, quantity, dates, refund, upgrade,
    /// line item, family sharing.
    public func saysTheSame(as other: AppStoreFields) -> Bool {
        if isSigned != other.isSigned {
            // Renewal info has no common ground worth the name: a change of naming is news.
            return transactionId != nil && transactionId == other.transactionId && originalTransactionId == other.originalTransactionId
                && productId == other.productId && quantity == other.quantity
                && purchaseDate?.milliseconds == other.purchaseDate?.milliseconds && expiresDate?.milliseconds == other.expiresDate?.milliseconds
                && cancellationDate?.milliseconds == other.cancellationDate?.milliseconds && cancellationReason == other.cancellationReason
                && webOrderLineItemId == other.webOrderLineItemId && isUpgraded == other.isUpgraded && isFamilyShared == other.isFamilyShared
        }
        guard isSigned else { return values == other.values }
        guard values.count - Self.volatileCount(values) == other.values.count - Self.volatileCount(other.values) else { return false }
        return values.allSatisfy { key, value in Self.volatileSignedKeys.contains(key) || other.values[key] == value }
    }

    private static func volatileCount(_ values: [String: String]) -> Int {
        volatileSignedKeys.reduce(0) { $0 + (values[$1] == nil ? 0 : 1) }
    }

    /// The fields are the value: what is read from them follows.
    public static func == (lhs: AppStoreFields, rhs: AppStoreFields) -> Bool {
        lhs.values == rhs.values
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(values)
    }

    /// Apple's `2013-01-01 00:00:00 Etc/GMT` form (the `*_ms` fields are preferred).
    static func parseAppleDate(_ text: String) -> Date? {
        let parts = text.split(separator: " ")
        guard parts.count >= 2 else { return LedgerJSON.parseTimestamp(text) }
        return LedgerJSON.parseTimestamp("\(parts[0])T\(parts[1]).000Z")
    }
}

/// A price as the App Store reports it in a signed transaction.
public struct AppStorePrice: Hashable, Sendable {
    /// Decimal text, for the whole quantity (`price` is in milliunits: 2970 is "2.97").
    public let amount: String
    /// ISO 4217.
    public let currency: String
}
