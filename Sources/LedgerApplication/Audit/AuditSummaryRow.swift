import LedgerDomain

/// Totals of one group of audit trail rows. Amounts are decimal text in `currency`.
///
/// Purchases and renewals count as money taken; refunds are counted separately and subtracted
/// only in `net`. A group key that was not asked for is nil (`currency` nil means rows without a
/// price, which carry no currency either).
public struct AuditSummaryRow: Sendable, Hashable, Codable {
    /// UTC day of `occurred_at`, `YYYY-MM-DD`, when grouped by day.
    public let day: String?
    public let productId: String?
    public let currency: String?
    public let environment: StoreEnvironment?
    /// The buyer's App Store country (ISO 3166-1 alpha-3), when grouped by storefront; nil in
    /// such a group for rows that cannot know it (verifyReceipt receipts name no storefront).
    public let storefront: String?
    /// Purchase and renewal rows.
    public let purchases: Int
    /// Units of those rows.
    public let units: Int
    /// Sum of the amounts of those of them with a price (Apple's signed price is already the
    /// whole quantity's).
    public let gross: String
    /// Refund rows, the units they took back, and what they gave back (the refunded share for a
    /// prorated refund, nothing for a family revocation).
    public let refunds: Int
    public let refundedUnits: Int
    public let refundedAmount: String
    /// gross − refundedAmount.
    public let net: String
    /// Rows (of any event) without an amount: not in any total.
    public let unpriced: Int
    /// The developer's proceeds of the purchase and renewal rows whose proceeds are known, in
    /// `proceedsCurrency` (see `AuditRow.proceeds`); nil when none is known.
    public let proceeds: String?
    /// Proceeds the refunds gave back.
    public let refundedProceeds: String?
    /// proceeds − refundedProceeds.
    public let netProceeds: String?
    /// Apple's proceeds currency, or for estimates the customer currency; a group whose rows
    /// Apple pays in two currencies is two rows, never added together.
    public let proceedsCurrency: String?
    /// Where the proceeds come from: one source, `mixed`, or `unknown` when no row's are known.
    public let proceedsSource: ProceedsRules.Source
    /// Money rows whose proceeds are unknown (no report line, no tax rate, no country or no
    /// price): not in the proceeds.
    public let proceedsUnknown: Int

    public init(
        day: String?, productId: String?, currency: String?, environment: StoreEnvironment?, storefront: String? = nil, purchases: Int, units: Int,
        gross: String, refunds: Int, refundedUnits: Int, refundedAmount: String, net: String, unpriced: Int,
        proceeds: String? = nil, refundedProceeds: String? = nil, netProceeds: String? = nil, proceedsCurrency: String? = nil,
        proceedsSource: ProceedsRules.Source = .unknown, proceedsUnknown: Int = 0
    ) {
        self.proceeds = proceeds
        self.refundedProceeds = refundedProceeds
        self.netProceeds = netProceeds
        self.proceedsCurrency = proceedsCurrency
        self.proceedsSource = proceedsSource
        self.proceedsUnknown = proceedsUnknown
        self.storefront = storefront
        self.day = day
        self.productId = productId
        self.currency = currency
        self.environment = environment
        self.purchases = purchases
        self.units = units
        self.gross = gross
        self.refunds = refunds
        self.refundedUnits = refundedUnits
        self.refundedAmount = refundedAmount
        self.net = net
        self.unpriced = unpriced
    }

    enum CodingKeys: String, CodingKey {
        case day, productId, currency, environment, storefront, purchases, units, gross, refunds, refundedUnits, refundedAmount, net, unpriced
        case proceeds, refundedProceeds, netProceeds, proceedsCurrency, proceedsSource, proceedsUnknown
    }

    /// Every key present, null when not grouped on, so every row has the same shape.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(day, forKey: .day)
        try container.encode(productId, forKey: .productId)
        try container.encode(currency, forKey: .currency)
        try container.encode(environment, forKey: .environment)
        try container.encode(storefront, forKey: .storefront)
        try container.encode(purchases, forKey: .purchases)
        try container.encode(units, forKey: .units)
        try container.encode(gross, forKey: .gross)
        try container.encode(refunds, forKey: .refunds)
        try container.encode(refundedUnits, forKey: .refundedUnits)
        try container.encode(refundedAmount, forKey: .refundedAmount)
        try container.encode(net, forKey: .net)
        try container.encode(unpriced, forKey: .unpriced)
        try container.encode(proceeds, forKey: .proceeds)
        try container.encode(refundedProceeds, forKey: .refundedProceeds)
        try container.encode(netProceeds, forKey: .netProceeds)
        try container.encode(proceedsCurrency, forKey: .proceedsCurrency)
        try container.encode(proceedsSource, forKey: .proceedsSource)
        try container.encode(proceedsUnknown, forKey: .proceedsUnknown)
    }
}
