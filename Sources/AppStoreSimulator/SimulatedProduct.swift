import AppStore
import Foundation
import LedgerDomain

/// A product the simulator sells: the catalog's product types (not `unknown`) and the durations the
/// App Store offers, with what App Store Connect lets an auto-renewable have besides (a group and a
/// level in it, an introductory offer) and Family Sharing.
public struct SimulatedProduct: Codable, Hashable, Sendable {
    public let productId: String
    public let type: ProductType
    /// Required for auto-renewables and non-renewing subscriptions, refused for the rest.
    public let duration: SubscriptionDuration?
    /// Auto-renewables only: the subscription group. A user has one subscription per group at a time,
    /// and buying another product of the group changes that subscription instead of adding one.
    /// Without a group the product is a group of its own.
    public let group: String?
    /// Auto-renewables only: the level of service within the group, 1 the highest (as App Store
    /// Connect ranks them); it decides whether a change is an upgrade, a downgrade or a crossgrade.
    public let level: Int?
    /// Non-consumables and auto-renewables only: purchases are shared with the buyer's family.
    public let familyShareable: Bool
    /// Auto-renewables only: what a user's first subscription in the group starts with.
    public let introOffer: IntroOffer?
    /// What a unit costs (decimal text, "0.99") and in what currency: signed transactions carry it
    /// as Apple's `price` (in milliunits) and `currency`. Receipts never did.
    public let price: String?
    public let currency: String?
    /// The price and currency in other App Store countries (keyed by ISO 3166-1 alpha-3
    /// storefront); `price` and `currency` are the rest's.
    public let storefrontPrices: [String: StorefrontPrice]

    public struct StorefrontPrice: Codable, Hashable, Sendable {
        public let price: String
        public let currency: String
    }

    /// What a unit costs in `storefront`, and in what currency; nil for a product without a price.
    public func price(in storefront: String) -> StorefrontPrice? {
        if let local = storefrontPrices[storefront] { return local }
        return price.map { StorefrontPrice(price: $0, currency: currency ?? "USD") }
    }

    /// An Advanced Commerce API product: its signed transactions carry Apple's nested
    /// `advancedCommerceInfo` (descriptors, a list of items with their SKU and price, the tax).
    public let advancedCommerce: Bool

    public init(
        productId: String,
        type: ProductType,
        duration: SubscriptionDuration? = nil,
        group: String? = nil,
        level: Int? = nil,
        familyShareable: Bool = false,
        introOffer: IntroOffer? = nil,
        price: String? = nil,
        currency: String? = nil,
        advancedCommerce: Bool = false,
        storefrontPrices: [String: StorefrontPrice] = [:]
    ) {
        self.storefrontPrices = storefrontPrices
        self.advancedCommerce = advancedCommerce
        self.price = price
        self.currency = currency
        self.productId = productId
        self.type = type
        self.duration = duration
        self.group = group
        self.level = level
        self.familyShareable = familyShareable
        self.introOffer = introOffer
    }

    enum CodingKeys: String, CodingKey {
        case productId, type, duration, group, level, familyShareable, introOffer, subscriptionGroupIdentifier, price, currency, advancedCommerce, storefrontPrices
    }

    /// Absent keys are absent features, so the products of earlier simulators still read.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            productId: try container.decode(String.self, forKey: .productId),
            type: try container.decode(ProductType.self, forKey: .type),
            duration: try container.decodeIfPresent(SubscriptionDuration.self, forKey: .duration),
            group: try container.decodeIfPresent(String.self, forKey: .group),
            level: try container.decodeIfPresent(Int.self, forKey: .level),
            familyShareable: try container.decodeIfPresent(Bool.self, forKey: .familyShareable) ?? false,
            introOffer: try container.decodeIfPresent(IntroOffer.self, forKey: .introOffer),
            price: try container.decodeIfPresent(String.self, forKey: .price),
            currency: try container.decodeIfPresent(String.self, forKey: .currency),
            advancedCommerce: try container.decodeIfPresent(Bool.self, forKey: .advancedCommerce) ?? false,
            storefrontPrices: try container.decodeIfPresent([String: StorefrontPrice].self, forKey: .storefrontPrices) ?? [:]
        )
    }

    /// Also writes `subscriptionGroupIdentifier`, so that a test can match it against receipts.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(productId, forKey: .productId)
        try container.encode(type, forKey: .type)
        try container.encodeIfPresent(duration, forKey: .duration)
        try container.encodeIfPresent(group, forKey: .group)
        try container.encodeIfPresent(level, forKey: .level)
        try container.encode(familyShareable, forKey: .familyShareable)
        try container.encodeIfPresent(introOffer, forKey: .introOffer)
        try container.encodeIfPresent(subscriptionGroupIdentifier, forKey: .subscriptionGroupIdentifier)
        try container.encodeIfPresent(price, forKey: .price)
        try container.encodeIfPresent(currency, forKey: .currency)
        if advancedCommerce { try container.encode(advancedCommerce, forKey: .advancedCommerce) }
        if !storefrontPrices.isEmpty { try container.encode(storefrontPrices, forKey: .storefrontPrices) }
    }

    /// "0.99" as Apple's milliunits (990); nil for text that is not a decimal with at most three places.
    static func milliunits(_ price: String) -> Int64? {
        let parts = price.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...2).contains(parts.count), let whole = Int64(parts[0]), whole >= 0 else { return nil }
        let fraction = parts.count == 2 ? String(parts[1]) : ""
        guard fraction.count <= 3, fraction.allSatisfy(\.isASCII), fraction.allSatisfy(\.isNumber) else { return nil }
        let padded = fraction + String(repeating: "0", count: 3 - fraction.count)
        guard let thousandths = Int64(padded) else { return nil }
        return whole * 1000 + thousandths
    }

    /// The group an auto-renewable subscribes in: its `group`, or itself alone; `nil` for other types.
    public var subscriptionGroup: String? {
        type == .autoRenewable ? (group ?? productId) : nil
    }

    /// The receipt's `subscription_group_identifier`: Apple's are numbers it assigns per group, so
    /// the simulator derives one from the group's name.
    public var subscriptionGroupIdentifier: String? {
        subscriptionGroup.map(Self.groupIdentifier)
    }

    /// The level used to compare products of one group; a product without one ranks 1.
    public var serviceLevel: Int { level ?? 1 }

    static func groupIdentifier(_ group: String) -> String {
        String(20_000_000 + SimulatorResponseRenderer.stableNumber(group) % 10_000_000)
    }
}

/// An introductory offer of an auto-renewable, counted in periods of the product's own duration.
///
/// As on the App Store, a free trial and a pay-up-front offer are one transaction spanning all of
/// their periods; pay as you go is one transaction per period at the intro price.
public struct IntroOffer: Codable, Hashable, Sendable {
    public enum Kind: String, Codable, Hashable, Sendable, CaseIterable {
        /// `is_trial_period` "true".
        case freeTrial = "free_trial"
        /// `is_in_intro_offer_period` "true", one payment per period.
        case payAsYouGo = "pay_as_you_go"
        /// `is_in_intro_offer_period` "true", one payment for every period.
        case payUpFront = "pay_up_front"
    }

    public let kind: Kind
    public let periods: Int

    /// How many periods the first transaction spans: all of them unless paid period by period.
    var firstTransactionPeriods: Int { kind == .payAsYouGo ? 1 : periods }
}

/// A subscription length, as ISO 8601 durations the catalog uses.
public enum SubscriptionDuration: String, Codable, Hashable, Sendable, CaseIterable {
    case sevenDays = "P7D"
    case oneMonth = "P1M"
    case twoMonths = "P2M"
    case threeMonths = "P3M"
    case sixMonths = "P6M"
    case oneYear = "P1Y"

    /// How long one period lasts in the sandbox, which renews fast so that renewals can be tested.
    public var sandboxPeriod: Duration {
        switch self {
        case .sevenDays: .seconds(3 * 60)
        case .oneMonth: .seconds(5 * 60)
        case .twoMonths: .seconds(10 * 60)
        case .threeMonths: .seconds(15 * 60)
        case .sixMonths: .seconds(30 * 60)
        case .oneYear: .seconds(60 * 60)
        }
    }

    /// The catalog's duration of the same length.
    public var isoDuration: ISODuration {
        switch self {
        case .sevenDays: ISODuration(days: 7)
        case .oneMonth: ISODuration(months: 1)
        case .twoMonths: ISODuration(months: 2)
        case .threeMonths: ISODuration(months: 3)
        case .sixMonths: ISODuration(months: 6)
        case .oneYear: ISODuration(years: 1)
        }
    }

    /// The start of period `index` (0 = the purchase) of a subscription bought at `start`, in `environment`:
    /// the sandbox's accelerated periods, or in production the catalog's calendar arithmetic in UTC,
    /// as `start + index × duration` (so that Jan 31 + 2 × P1M is Mar 31, not Mar 28).
    public func periodStart(_ index: Int, from start: Date, in environment: StoreEnvironment) -> Date {
        switch environment {
        case .sandbox:
            return start.addingTimeInterval(RetryPolicy.seconds(sandboxPeriod) * Double(index))
        case .production:
            let one = isoDuration
            return ISODuration(years: one.years * index, months: one.months * index, weeks: one.weeks * index, days: one.days * index)
                .added(to: start)
        }
    }
}
