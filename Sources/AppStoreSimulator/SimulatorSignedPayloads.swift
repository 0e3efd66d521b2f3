import AppStore
import Foundation
import LedgerDomain
import X509

/// Signs payloads in the shapes Apple signs them (StoreKit 2 transactions, renewal info, App
/// Store Server Notifications V2) with the simulator's test certificate authority.
public struct SimulatorSignedPayloads: Sendable {
    public let authority: SimulatorCertificateAuthority

    public init(authority: SimulatorCertificateAuthority) {
        self.authority = authority
    }

    /// Apple's `type` for a product type.
    public static func typeName(_ type: ProductType) -> String {
        switch type {
        case .autoRenewable: "Auto-Renewable Subscription"
        case .nonRenewing: "Non-Renewing Subscription"
        case .consumable: "Consumable"
        case .nonConsumable: "Non-Consumable"
        // StoreKit 2 knows no free subscription (a subscription without a price is an
        // auto-renewable or non-renewing one in App Store Connect).
        case .freeSubscription: "Non-Renewing Subscription"
        case .unknown: "Unknown"
        }
    }

    /// A `JWSTransactionDecodedPayload`. Dates are milliseconds; `price` is in milliunits
    /// (990 for 0.99); `nil` values are left out, as Apple leaves them out.
    public static func transaction(
        transactionId: String, originalTransactionId: String? = nil, bundleId: String, productId: String, type: ProductType,
        purchaseDate: Date, originalPurchaseDate: Date? = nil, expiresDate: Date? = nil, quantity: Int = 1,
        price: Int64? = nil, currency: String? = nil, environment: StoreEnvironment, webOrderLineItemId: String? = nil,
        subscriptionGroupIdentifier: String? = nil, revocationDate: Date? = nil, revocationReason: Int? = nil, isUpgraded: Bool = false,
        offerType: Int? = nil, offerDiscountType: String? = nil, inAppOwnershipType: String = "PURCHASED",
        transactionReason: String? = nil, appAccountToken: String? = nil, storefront: String = "USA", signedDate: Date
    ) -> [String: Any] {
        var fields: [String: Any] = [
            "transactionId": transactionId, "originalTransactionId": originalTransactionId ?? transactionId, "bundleId": bundleId,
            "productId": productId, "type": typeName(type), "purchaseDate": purchaseDate.milliseconds,
            "originalPurchaseDate": (originalPurchaseDate ?? purchaseDate).milliseconds, "quantity": quantity,
            "environment": environment.responseValue, "inAppOwnershipType": inAppOwnershipType, "signedDate": signedDate.milliseconds,
            "storefront": storefront, "storefrontId": "143441",
            "transactionReason": transactionReason ?? (transactionId == (originalTransactionId ?? transactionId) ? "PURCHASE" : "RENEWAL"),
        ]
        if let expiresDate { fields["expiresDate"] = expiresDate.milliseconds }
        if let price { fields["price"] = price }
        if let currency { fields["currency"] = currency }
        if let webOrderLineItemId { fields["webOrderLineItemId"] = webOrderLineItemId }
        if let subscriptionGroupIdentifier { fields["subscriptionGroupIdentifier"] = subscriptionGroupIdentifier }
        if let revocationDate { fields["revocationDate"] = revocationDate.milliseconds }
        if let revocationReason { fields["revocationReason"] = revocationReason }
        if isUpgraded { fields["isUpgraded"] = true }
        if let offerType { fields["offerType"] = offerType }
        if let offerDiscountType { fields["offerDiscountType"] = offerDiscountType }
        if let appAccountToken { fields["appAccountToken"] = appAccountToken }
        return fields
    }

    /// A `JWSRenewalInfoDecodedPayload`.
    public static func renewalInfo(
        originalTransactionId: String, productId: String, autoRenewProductId: String? = nil, autoRenewStatus: Int = 1,
        environment: StoreEnvironment, expirationIntent: Int? = nil, isInBillingRetryPeriod: Bool? = nil,
        gracePeriodExpiresDate: Date? = nil, renewalDate: Date? = nil, signedDate: Date
    ) -> [String: Any] {
        var fields: [String: Any] = [
            "originalTransactionId": originalTransactionId, "productId": productId, "autoRenewProductId": autoRenewProductId ?? productId,
            "autoRenewStatus": autoRenewStatus, "environment": environment.responseValue, "signedDate": signedDate.milliseconds,
        ]
        if let expirationIntent { fields["expirationIntent"] = expirationIntent }
        if let isInBillingRetryPeriod { fields["isInBillingRetryPeriod"] = isInBillingRetryPeriod }
        if let gracePeriodExpiresDate { fields["gracePeriodExpiresDate"] = gracePeriodExpiresDate.milliseconds }
        if let renewalDate { fields["renewalDate"] = renewalDate.milliseconds }
        return fields
    }

    /// A `responseBodyV2DecodedPayload` with its `data`, the signed transaction and renewal info inside.
    public static func notification(
        type: String, subtype: String? = nil, uuid: String = UUID().uuidString.lowercased(), bundleId: String, appAppleId: Int64? = nil,
        environment: StoreEnvironment, signedTransactionInfo: String?, signedRenewalInfo: String? = nil, status: Int? = nil,
        consumptionRequestReason: String? = nil, signedDate: Date
    ) -> [String: Any] {
        var data: [String: Any] = ["bundleId": bundleId, "environment": environment.responseValue, "bundleVersion": "1"]
        if let consumptionRequestReason { data["consumptionRequestReason"] = consumptionRequestReason }
        if let appAppleId { data["appAppleId"] = appAppleId }
        if let signedTransactionInfo { data["signedTransactionInfo"] = signedTransactionInfo }
        if let signedRenewalInfo { data["signedRenewalInfo"] = signedRenewalInfo }
        if let status { data["status"] = status }
        var payload: [String: Any] = ["notificationType": type, "notificationUUID": uuid, "version": "2.0",
                                      "signedDate": signedDate.milliseconds, "data": data]
        if let subtype { payload["subtype"] = subtype }
        return payload
    }

    /// `fields` as a JWS signed by the authority (or over the given chain, for tests of broken chains).
    public func sign(_ fields: [String: Any], chain: [Certificate]? = nil) throws -> String {
        try authority.sign(try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys]), chain: chain)
    }
}
