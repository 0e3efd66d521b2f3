/// One product of an app's catalog.
public struct Product: Codable, Hashable, Sendable {
    public let productId: String
    public let type: ProductType
    /// Required for auto-renewable and non-renewing subscriptions, absent otherwise.
    public let duration: ISODuration?
    /// Non-renewing periods of one group stack; defaults to the product id.
    public let subscriptionGroup: String
    public let referenceName: String?
    /// Price per ISO 4217 currency code, as decimal text ("0.99"): money is never a float.
    public let prices: [String: String]

    public init(
        productId: String,
        type: ProductType,
        duration: ISODuration? = nil,
        subscriptionGroup: String? = nil,
        referenceName: String? = nil,
        prices: [String: String] = [:]
    ) throws(LedgerInputError) {
        guard !productId.isEmpty, productId.utf8.count <= 255,
              productId.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value != 0x7F && $0 != "/" })
        else {
            throw .invalidProduct("product id '\(productId)' must be 1 to 255 printable characters without spaces or '/'")
        }
        guard type != .unknown else {
            throw .invalidProduct("'unknown' is what the ledger records for products missing from the catalog; define \(productId) as consumable, non_consumable, auto_renewable, non_renewing or free_subscription")
        }
        if type.requiresDuration && duration == nil {
            throw .invalidProduct("\(type.rawValue) product \(productId) needs a duration such as P7D, P1M, P2M, P3M, P6M or P1Y")
        }
        if !type.requiresDuration && duration != nil {
            throw .invalidProduct("\(type.rawValue) product \(productId) takes no duration; only auto_renewable and non_renewing subscriptions do")
        }
        for (currency, price) in prices {
            guard Self.isCurrencyCode(currency) else {
                throw .invalidProduct("currency '\(currency)' of \(productId) is not an ISO 4217 code such as USD or EUR")
            }
            guard Self.isDecimal(price) else {
                throw .invalidProduct("price '\(price)' of \(productId) in \(currency) is not a decimal amount such as 0.99")
            }
        }
        self.productId = productId
        self.type = type
        self.duration = duration
        self.subscriptionGroup = subscriptionGroup.flatMap { $0.isEmpty ? nil : $0 } ?? productId
        self.referenceName = referenceName
        self.prices = prices
    }

    /// Three upper-case letters, as ISO 4217 codes are: "USD", "EUR".
    public static func isCurrencyCode(_ text: String) -> Bool {
        text.count == 3 && text.allSatisfy { $0.isASCII && $0.isUppercase }
    }

    /// Non-negative decimal text with at most 4 fraction digits: "0", "0.99", "12.5".
    public static func isDecimal(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = parts.first, !whole.isEmpty, whole.count <= 12,
              whole.allSatisfy(\.isASCII), whole.allSatisfy(\.isNumber)
        else { return false }
        if parts.count == 2 {
            let fraction = parts[1]
            return (1...4).contains(fraction.count) && fraction.allSatisfy { $0.isASCII && $0.isNumber }
        }
        return true
    }
}
