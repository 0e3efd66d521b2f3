import Foundation

/// One line of Apple's Summary Sales Report (Sales and Trends, daily), as the ledger keeps it:
/// the columns it reconciles and explains by, in Apple's own words and units.
///
/// Apple aggregates a line per product, country, customer price, proceeds and a few more columns;
/// `units` is the line's count (negative for refunds, with a negative `customerPrice` and a
/// positive `developerProceeds`: proceeds are per unit, their sign is the units'). Amounts are
/// decimal text as Apple wrote them, normalised (`.70` is kept as `0.70`), never floating point.
public struct SalesReportLine: Codable, Hashable, Sendable {
    /// SKU: for an in-app purchase, its product id.
    public let sku: String
    public let title: String
    /// Apple's Product Type Identifier (`IA1`, `IA9`, `IAY`, `IAC`, `FI1`, …).
    public let productTypeIdentifier: String
    public let units: String
    /// Per unit, in `proceedsCurrency`.
    public let developerProceeds: String
    /// Per unit, in `customerCurrency`; negative on refund lines.
    public let customerPrice: String
    public let customerCurrency: String
    public let proceedsCurrency: String
    /// ISO 3166-1 alpha-2 code of the storefront.
    public let countryCode: String
    /// Apple's reporting days the line covers (`yyyy-MM-dd`).
    public let beginDate: String
    public let endDate: String
    public let appleIdentifier: String
    public let parentIdentifier: String?
    public let promoCode: String?
    /// `New` or `Renewal` for auto-renewable subscriptions.
    public let subscription: String?
    /// The subscription's duration (`7 Days`, `1 Month`, …).
    public let period: String?
    /// `Rate After One Year` when Apple's commission is the reduced one.
    public let proceedsReason: String?
    public let orderType: String?
    public let device: String?

    public init(
        sku: String, title: String, productTypeIdentifier: String, units: String, developerProceeds: String,
        customerPrice: String, customerCurrency: String, proceedsCurrency: String, countryCode: String,
        beginDate: String, endDate: String, appleIdentifier: String, parentIdentifier: String? = nil,
        promoCode: String? = nil, subscription: String? = nil, period: String? = nil, proceedsReason: String? = nil,
        orderType: String? = nil, device: String? = nil
    ) {
        self.sku = sku
        self.title = title
        self.productTypeIdentifier = productTypeIdentifier
        self.units = units
        self.developerProceeds = developerProceeds
        self.customerPrice = customerPrice
        self.customerCurrency = customerCurrency
        self.proceedsCurrency = proceedsCurrency
        self.countryCode = countryCode
        self.beginDate = beginDate
        self.endDate = endDate
        self.appleIdentifier = appleIdentifier
        self.parentIdentifier = parentIdentifier
        self.promoCode = promoCode
        self.subscription = subscription
        self.period = period
        self.proceedsReason = proceedsReason
        self.orderType = orderType
        self.device = device
    }

    /// Apple's product type identifiers of in-app purchases (iOS, and `-M`/`FI1` for macOS):
    /// the lines the ledger reconciles. App downloads, updates and bundles are not purchases it records.
    public var isInAppPurchase: Bool {
        productTypeIdentifier.hasPrefix("IA") || productTypeIdentifier == "FI1"
    }
}
