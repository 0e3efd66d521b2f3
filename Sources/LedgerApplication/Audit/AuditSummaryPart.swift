import LedgerDomain

/// Totals of audit rows that share a summary group and everything their proceeds depend on
/// (reporting day, product, country, price, sale or refund, year of paid service, environment):
/// what the store adds up, before `AuditProceeds.summarize` adds the proceeds and rolls the parts
/// up into `AuditSummaryRow`s.
public struct AuditSummaryPart: Sendable, Hashable {
    /// The summary group's keys, nil where not grouped on.
    public let day: String?
    public let productId: String?
    public let currency: String?
    public let environment: StoreEnvironment?
    public let storefront: String?
    /// What the proceeds depend on.
    public let basis: ProceedsBasis
    public let basisProductId: String
    public let basisStorefront: String?
    public let price: String?
    public let sandbox: Bool
    /// As in `AuditSummaryRow`.
    public let purchases: Int
    public let units: Int
    public let gross: String
    public let refunds: Int
    public let refundedUnits: Int
    public let refundedAmount: String
    public let unpriced: Int

    public init(
        day: String?, productId: String?, currency: String?, environment: StoreEnvironment?, storefront: String?, basis: ProceedsBasis,
        basisProductId: String, basisStorefront: String?, price: String?, sandbox: Bool, purchases: Int, units: Int, gross: String,
        refunds: Int, refundedUnits: Int, refundedAmount: String, unpriced: Int
    ) {
        self.day = day
        self.productId = productId
        self.currency = currency
        self.environment = environment
        self.storefront = storefront
        self.basis = basis
        self.basisProductId = basisProductId
        self.basisStorefront = basisStorefront
        self.price = price
        self.sandbox = sandbox
        self.purchases = purchases
        self.units = units
        self.gross = gross
        self.refunds = refunds
        self.refundedUnits = refundedUnits
        self.refundedAmount = refundedAmount
        self.unpriced = unpriced
    }
}
