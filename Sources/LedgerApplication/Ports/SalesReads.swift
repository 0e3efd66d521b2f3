import Foundation

/// The ledger's side of a reconciliation with Apple's sales reports: its money rows (the audit
/// trail) grouped at the grain Apple reports by, and the transactions behind one group.
public protocol SalesReads: Sendable {
    /// The app's purchase, renewal, upgrade, crossgrade and refund rows whose money moved in
    /// `[from, to)`, grouped by reporting day in `timeZone` (an IANA name), product, storefront,
    /// currency, unit price, kind and environment.
    func salesGroups(app: String, from: Date, to: Date, timeZone: String) async throws -> [LedgerSalesGroup]

    /// The transaction ids of the rows of one group (at most `limit`), in log order.
    func transactions(app: String, in group: LedgerSalesGroup.Grain, timeZone: String, limit: Int) async throws -> [String]
}

/// Some of the ledger's money rows that share Apple's grain.
public struct LedgerSalesGroup: Sendable, Hashable {
    /// What the rows share.
    public struct Grain: Sendable, Hashable {
        /// `yyyy-MM-dd` in the reporting time zone.
        public let day: String
        public let productId: String
        /// ISO 3166-1 alpha-3, as Apple's signed transactions say it; nil for verifyReceipt rows.
        public let storefront: String?
        public let currency: String?
        /// Per unit; nil when unpriced.
        public let price: String?
        public let refund: Bool
        public let sandbox: Bool

        public init(day: String, productId: String, storefront: String?, currency: String?, price: String?, refund: Bool, sandbox: Bool) {
            self.day = day
            self.productId = productId
            self.storefront = storefront
            self.currency = currency
            self.price = price
            self.refund = refund
            self.sandbox = sandbox
        }
    }

    public let grain: Grain
    /// Units (for refunds, those taken back).
    public let units: Int
    /// Sum of the rows' money; nil when any is unpriced.
    public let amount: String?
    /// Rows of a free trial.
    public let freeTrial: Bool
    /// Refund rows of a prorated refund among them.
    public let prorated: Int
    /// Units of auto-renewable payments after the subscriber's first year of paid service
    /// (Apple's reduced commission; see `ProceedsBasis.pastAYear`), or refunds of such payments.
    public let pastAYearUnits: Int

    public init(grain: Grain, units: Int, amount: String?, freeTrial: Bool, prorated: Int, pastAYearUnits: Int = 0) {
        self.grain = grain
        self.units = units
        self.amount = amount
        self.freeTrial = freeTrial
        self.prorated = prorated
        self.pastAYearUnits = pastAYearUnits
    }
}
