import Foundation
import LedgerDomain

/// A product the ledger took money for that the app's catalog still does not define.
public struct UnclassifiedProduct: Sendable, Hashable, Codable {
    public let productId: String
    /// Distinct purchase and renewal transactions.
    public let transactions: Int
    public let units: Int
    /// Distinct users who bought it.
    public let users: Int
    /// Earliest and latest purchase date.
    public let firstPurchase: Date
    public let lastPurchase: Date

    public init(productId: String, transactions: Int, units: Int, users: Int, firstPurchase: Date, lastPurchase: Date) {
        self.productId = productId
        self.transactions = transactions
        self.units = units
        self.users = users
        self.firstPurchase = firstPurchase
        self.lastPurchase = lastPurchase
    }

    enum CodingKeys: String, CodingKey {
        case productId, transactions, units, users, firstPurchase, lastPurchase
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        func time(_ key: CodingKeys) throws -> Date {
            let text = try container.decode(String.self, forKey: key)
            guard let date = LedgerJSON.parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(forKey: key, in: container, debugDescription: "'\(text)' is not an ISO 8601 time")
            }
            return date
        }
        self.init(
            productId: try container.decode(String.self, forKey: .productId),
            transactions: try container.decode(Int.self, forKey: .transactions),
            units: try container.decode(Int.self, forKey: .units),
            users: try container.decode(Int.self, forKey: .users),
            firstPurchase: try time(.firstPurchase),
            lastPurchase: try time(.lastPurchase)
        )
    }

    /// Times as ISO 8601 UTC text, whatever the encoder's date strategy.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(productId, forKey: .productId)
        try container.encode(transactions, forKey: .transactions)
        try container.encode(units, forKey: .units)
        try container.encode(users, forKey: .users)
        try container.encode(LedgerJSON.formatTimestamp(firstPurchase), forKey: .firstPurchase)
        try container.encode(LedgerJSON.formatTimestamp(lastPurchase), forKey: .lastPurchase)
    }
}
