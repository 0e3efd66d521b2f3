import Foundation
import LedgerDomain
import LedgerProjections

/// One money event of the audit trail, as finance reads it.
///
/// Encodes with ISO 8601 UTC times and every key present (null when absent), whatever the
/// encoder's date strategy, so JSON and CSV exports carry the same columns.
public struct AuditRow: Sendable, Hashable {
    /// Log position of the event; with `event`, the row's key and its order.
    public let position: Int64
    /// When the money moved: the purchase date, or for a refund the refund date.
    public let occurredAt: Date
    /// When the ledger recorded the event.
    public let recordedAt: Date?
    public let environment: StoreEnvironment
    public let userId: String
    public let deviceId: String?
    public let event: AuditEventKind
    public let transactionId: String
    public let originalTransactionId: String
    public let productId: String
    public let productType: ProductType
    public let quantity: Int
    /// Price per unit as decimal text, nil when no source knows it (unpriced).
    public let price: String?
    public let currency: String?
    /// The row's money as decimal text: the whole quantity's (Apple's signed price as it is, else
    /// price × quantity), or for a refund what it gave back; nil when unpriced.
    public let amount: String?
    /// Where `price` comes from: device, catalog, trial or none.
    public let priceSource: UserLedger.Transaction.PriceSource
    /// The catalog's price when the device reported a different one: the row keeps the device's, flagged by this.
    public let catalogPrice: String?
    /// How it was offered: none, free_trial or intro_offer.
    public let offer: UserLedger.Transaction.Offer
    public let purchaseDate: Date
    public let expiresDate: Date?
    /// The transaction has been refunded or revoked (on its purchase row as on its refund row).
    public let revoked: Bool
    /// Refund rows: full, prorated or family_revoke; nil on other rows.
    public let refund: String?
    /// Refund rows of a prorated refund: the share refunded, in milliunits of a percent (40000 = 40 %).
    public let refundShare: Int?
    /// The buyer's App Store country (ISO 3166-1 alpha-3, Apple's `storefront`); nil when only
    /// verifyReceipt receipts told of the transaction, which name no storefront.
    public let storefront: String?
    /// The developer's proceeds of the row, with the sign convention of `amount` (a refund's are
    /// what it gave back), in `proceedsCurrency`; nil when unknown. See `AuditProceeds`.
    public internal(set) var proceeds: String?
    /// Apple's proceeds currency, or for an estimate the customer currency.
    public internal(set) var proceedsCurrency: String?
    /// Where `proceeds` come from: `apple_report`, an estimate's rule (`estimate:…`), `free`, or `unknown`.
    public internal(set) var proceedsSource: ProceedsRules.Source?
    /// What the store knows for the proceeds (the reporting day, the year of paid service); not exported.
    public var basis: ProceedsBasis?

    public init(
        position: Int64, occurredAt: Date, recordedAt: Date?, environment: StoreEnvironment, userId: String,
        deviceId: String?, event: AuditEventKind, transactionId: String, originalTransactionId: String, productId: String,
        productType: ProductType, quantity: Int, price: String?, currency: String?, amount: String?,
        priceSource: UserLedger.Transaction.PriceSource, catalogPrice: String?, offer: UserLedger.Transaction.Offer,
        purchaseDate: Date, expiresDate: Date?, revoked: Bool, refund: String? = nil, refundShare: Int? = nil, storefront: String? = nil,
        proceeds: String? = nil, proceedsCurrency: String? = nil, proceedsSource: ProceedsRules.Source? = nil, basis: ProceedsBasis? = nil
    ) {
        self.proceeds = proceeds
        self.proceedsCurrency = proceedsCurrency
        self.proceedsSource = proceedsSource
        self.basis = basis
        self.position = position
        self.occurredAt = occurredAt
        self.recordedAt = recordedAt
        self.environment = environment
        self.userId = userId
        self.deviceId = deviceId
        self.event = event
        self.transactionId = transactionId
        self.originalTransactionId = originalTransactionId
        self.productId = productId
        self.productType = productType
        self.quantity = quantity
        self.price = price
        self.currency = currency
        self.amount = amount
        self.priceSource = priceSource
        self.catalogPrice = catalogPrice
        self.offer = offer
        self.purchaseDate = purchaseDate
        self.expiresDate = expiresDate
        self.revoked = revoked
        self.refund = refund
        self.refundShare = refundShare
        self.storefront = storefront
    }
}

extension AuditRow: Codable {
    enum CodingKeys: String, CodingKey {
        case position, occurredAt, recordedAt, environment, userId, deviceId, event, transactionId, originalTransactionId
        case productId, productType, quantity, price, currency, amount, priceSource, catalogPrice, offer
        case purchaseDate, expiresDate, revoked, refund, refundShare, storefront
        case proceeds, proceedsCurrency, proceedsSource
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func time(_ key: CodingKeys) throws -> Date? {
            guard let text = try container.decodeIfPresent(String.self, forKey: key) else { return nil }
            guard let date = LedgerJSON.parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
            }
            return date
        }
        func required(_ key: CodingKeys) throws -> Date {
            guard let date = try time(key) else {
                throw DecodingError.valueNotFound(Date.self, .init(codingPath: [key], debugDescription: "\(key.stringValue) is required"))
            }
            return date
        }
        self.init(
            position: try container.decode(Int64.self, forKey: .position),
            occurredAt: try required(.occurredAt),
            recordedAt: try time(.recordedAt),
            environment: try container.decode(StoreEnvironment.self, forKey: .environment),
            userId: try container.decode(String.self, forKey: .userId),
            deviceId: try container.decodeIfPresent(String.self, forKey: .deviceId),
            event: try container.decode(AuditEventKind.self, forKey: .event),
            transactionId: try container.decode(String.self, forKey: .transactionId),
            originalTransactionId: try container.decode(String.self, forKey: .originalTransactionId),
            productId: try container.decode(String.self, forKey: .productId),
            productType: try container.decode(ProductType.self, forKey: .productType),
            quantity: try container.decode(Int.self, forKey: .quantity),
            price: try container.decodeIfPresent(String.self, forKey: .price),
            currency: try container.decodeIfPresent(String.self, forKey: .currency),
            amount: try container.decodeIfPresent(String.self, forKey: .amount),
            priceSource: try container.decode(UserLedger.Transaction.PriceSource.self, forKey: .priceSource),
            catalogPrice: try container.decodeIfPresent(String.self, forKey: .catalogPrice),
            offer: try container.decode(UserLedger.Transaction.Offer.self, forKey: .offer),
            purchaseDate: try required(.purchaseDate),
            expiresDate: try time(.expiresDate),
            revoked: try container.decode(Bool.self, forKey: .revoked),
            refund: try container.decodeIfPresent(String.self, forKey: .refund),
            refundShare: try container.decodeIfPresent(Int.self, forKey: .refundShare),
            storefront: try container.decodeIfPresent(String.self, forKey: .storefront),
            proceeds: try container.decodeIfPresent(String.self, forKey: .proceeds),
            proceedsCurrency: try container.decodeIfPresent(String.self, forKey: .proceedsCurrency),
            proceedsSource: try container.decodeIfPresent(ProceedsRules.Source.self, forKey: .proceedsSource)
        )
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(position, forKey: .position)
        try container.encode(LedgerJSON.formatTimestamp(occurredAt), forKey: .occurredAt)
        try container.encode(recordedAt.map(LedgerJSON.formatTimestamp), forKey: .recordedAt)
        try container.encode(environment, forKey: .environment)
        try container.encode(userId, forKey: .userId)
        try container.encode(deviceId, forKey: .deviceId)
        try container.encode(event, forKey: .event)
        try container.encode(transactionId, forKey: .transactionId)
        try container.encode(originalTransactionId, forKey: .originalTransactionId)
        try container.encode(productId, forKey: .productId)
        try container.encode(productType, forKey: .productType)
        try container.encode(quantity, forKey: .quantity)
        try container.encode(price, forKey: .price)
        try container.encode(currency, forKey: .currency)
        try container.encode(amount, forKey: .amount)
        try container.encode(priceSource, forKey: .priceSource)
        try container.encode(catalogPrice, forKey: .catalogPrice)
        try container.encode(offer, forKey: .offer)
        try container.encode(LedgerJSON.formatTimestamp(purchaseDate), forKey: .purchaseDate)
        try container.encode(expiresDate.map(LedgerJSON.formatTimestamp), forKey: .expiresDate)
        try container.encode(revoked, forKey: .revoked)
        try container.encode(refund, forKey: .refund)
        try container.encode(refundShare, forKey: .refundShare)
        try container.encode(storefront, forKey: .storefront)
        try container.encode(proceeds, forKey: .proceeds)
        try container.encode(proceedsCurrency, forKey: .proceedsCurrency)
        try container.encode(proceedsSource, forKey: .proceedsSource)
    }
}
