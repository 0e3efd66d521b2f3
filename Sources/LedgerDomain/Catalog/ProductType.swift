/// What kind of in-app product something is, which decides how it is owned.
///
/// `unknown` is for a transaction whose product the catalog does not know: the money was still
/// taken, so it is recorded, and a replay after the product is added classifies it.
public enum ProductType: String, Codable, Sendable, CaseIterable, Hashable {
    case consumable
    case nonConsumable = "non_consumable"
    case autoRenewable = "auto_renewable"
    case nonRenewing = "non_renewing"
    case freeSubscription = "free_subscription"
    case unknown

    /// Types that need a duration in the catalog.
    public var requiresDuration: Bool {
        self == .autoRenewable || self == .nonRenewing
    }

    /// Types owned for ever once bought (until revoked).
    public var isOwnedForever: Bool {
        self == .nonConsumable || self == .freeSubscription
    }
}
