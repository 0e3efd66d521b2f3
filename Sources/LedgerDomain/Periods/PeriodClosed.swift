import Foundation

/// Finance closed a period of an app (stream `periods/<bundle id>`): the audit trail's figures of
/// the period as they stood at log position `position`, frozen. A closed period's figures are
/// answered from this fact, always the same; whatever the ledger learns later that changes the
/// period's rows is an adjustment, booked in a later period and naming its cause.
///
/// The rows the figures add up are kept beside the fact (`ledger.closed_period_rows`, by
/// `closeId`), so that each later change can be found row by row; `rows` and `rowsChecksum` tie
/// them to it. `signature` is the anchor key's Ed25519 signature over `signedContent`: the fact
/// without its signature, in its stored JSON.
public struct PeriodClosed: LedgerEvent {
    public static let typeName = try! EventTypeName("PeriodClosed", version: 1)

    /// What the figures add up, per environment, currency and product (and currency of proceeds).
    public struct Figure: Codable, Hashable, Sendable {
        public let environment: StoreEnvironment
        /// Nil for the rows without a price.
        public let currency: String?
        public let productId: String
        public let purchases: Int
        public let units: Int
        public let gross: String
        public let refunds: Int
        public let refundedUnits: Int
        public let refundedAmount: String
        public let net: String
        public let unpriced: Int
        public let proceeds: String?
        public let refundedProceeds: String?
        public let netProceeds: String?
        public let proceedsCurrency: String?
        public let proceedsSource: String
        public let proceedsUnknown: Int

        public init(
            environment: StoreEnvironment, currency: String?, productId: String, purchases: Int, units: Int, gross: String, refunds: Int,
            refundedUnits: Int, refundedAmount: String, net: String, unpriced: Int, proceeds: String?, refundedProceeds: String?,
            netProceeds: String?, proceedsCurrency: String?, proceedsSource: String, proceedsUnknown: Int
        ) {
            self.environment = environment
            self.currency = currency
            self.productId = productId
            self.purchases = purchases
            self.units = units
            self.gross = gross
            self.refunds = refunds
            self.refundedUnits = refundedUnits
            self.refundedAmount = refundedAmount
            self.net = net
            self.unpriced = unpriced
            self.proceeds = proceeds
            self.refundedProceeds = refundedProceeds
            self.netProceeds = netProceeds
            self.proceedsCurrency = proceedsCurrency
            self.proceedsSource = proceedsSource
            self.proceedsUnknown = proceedsUnknown
        }
    }

    /// `yyyy-MM`.
    public let period: String
    /// The IANA time zone the period's month is taken in.
    public let timeZone: String
    /// The period's bounds, `[from, to)`.
    public let from: Date
    public let to: Date
    /// The identity of the rows kept beside the fact.
    public let closeId: UUID
    /// The log position the figures reflect: every fact up to it, none after.
    public let position: Int64
    /// The audit trail's version (its fold) that gave the rows.
    public let auditTrailVersion: Int
    public let rows: Int
    /// Sum of the kept rows' checksums (see migration 0024), as decimal text.
    public let rowsChecksum: String
    public let figures: [Figure]
    /// Who closed it: the key id or the operator's name.
    public let closedBy: String
    /// The anchor key's public key (PEM) and its signature (base64) of `signedContent`.
    public let publicKey: String
    public let signature: String

    public init(
        period: String, timeZone: String, from: Date, to: Date, closeId: UUID, position: Int64, auditTrailVersion: Int, rows: Int,
        rowsChecksum: String, figures: [Figure], closedBy: String, publicKey: String, signature: String
    ) {
        self.period = period
        self.timeZone = timeZone
        self.from = from
        self.to = to
        self.closeId = closeId
        self.position = position
        self.auditTrailVersion = auditTrailVersion
        self.rows = rows
        self.rowsChecksum = rowsChecksum
        self.figures = figures
        self.closedBy = closedBy
        self.publicKey = publicKey
        self.signature = signature
    }

    /// The bytes signed: this fact's stored JSON with an empty signature.
    public var signedContent: Data {
        get throws {
            let unsigned = PeriodClosed(period: period, timeZone: timeZone, from: from, to: to, closeId: closeId, position: position,
                                        auditTrailVersion: auditTrailVersion, rows: rows, rowsChecksum: rowsChecksum, figures: figures,
                                        closedBy: closedBy, publicKey: publicKey, signature: "")
            return Data(try LedgerJSON.encode(unsigned).utf8)
        }
    }
}

/// Finance reopened a closed period (stream `periods/<bundle id>`), saying why. The close stays in
/// the log; until the period is closed again its figures are the audit trail's, as they are now.
public struct PeriodReopened: LedgerEvent {
    public static let typeName = try! EventTypeName("PeriodReopened", version: 1)

    public let period: String
    /// The close it reopens.
    public let closeId: UUID
    public let reason: String
    public let reopenedBy: String

    public init(period: String, closeId: UUID, reason: String, reopenedBy: String) {
        self.period = period
        self.closeId = closeId
        self.reason = reason
        self.reopenedBy = reopenedBy
    }
}
