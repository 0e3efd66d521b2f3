import AppStore
import Foundation
import LedgerDomain

/// A product the simulator sells: the catalog's product types (not `unknown`) and the durations the
/// App Store offers.
public struct SimulatedProduct: Codable, Hashable, Sendable {
    public let productId: String
    public let type: ProductType
    /// Required for auto-renewables and non-renewing subscriptions, refused for the rest.
    public let duration: SubscriptionDuration?

    public init(productId: String, type: ProductType, duration: SubscriptionDuration? = nil) {
        self.productId = productId
        self.type = type
        self.duration = duration
    }
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
