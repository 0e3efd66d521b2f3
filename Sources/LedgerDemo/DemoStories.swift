import Foundation
import NIOHTTP1

/// The demo's stories, told through the ledger's HTTP API and the App Store simulator's admin API.
///
/// Each story buys in the simulator, posts the receipts to the ledger as an app's server would,
/// and reads back what the user now has, passing the position of its writes as `minPosition` so
/// that it reads its own writes. Every step is printed through `printer` and returned in a
/// `StoryResult`. A step whose status is not the one the story expects stops it with a `DemoError`.
public struct DemoStories: Sendable {
    /// The products the stories use, defined in the simulator and in the ledger's catalog.
    public enum Product {
        public static let coins = "coins"
        public static let levelPack = "level_pack"
        public static let proMonthly = "pro_monthly"
        public static let seasonPass = "season_pass"
        public static let noAds = "no_ads"
    }

    public let client: DemoClient
    /// The app's own server, taking the ledger's webhooks, and where it listens; the following
    /// story is told only with one.
    let appServer: DemoAppServer?
    let appServerBase: String?
    let printer: @Sendable (String) -> Void

    public init(client: DemoClient, appServer: DemoAppServer? = nil, appServerBase: String? = nil, printer: @escaping @Sendable (String) -> Void = { _ in }) {
        self.client = client
        self.appServer = appServer
        self.appServerBase = appServerBase
        self.printer = printer
    }

    /// Defines the products, then tells every story (the following story when the app's server is
    /// given). The auto-renewable story moves the simulator's clock forward by most of an hour, so
    /// only the restore story, whose receipts the replay story verifies again, comes after it.
    public func runAll() async throws -> [StoryResult] {
        try await defineCatalog()
        return [
            try await consumable(),
            try await nonConsumable(),
            try await nonRenewing(),
            try await refund(),
            try await storeKit2(),
        ] + (appServer == nil ? [] : [try await following()]) + [
            try await autoRenewable(),
            try await restoredSubscription(),
        ]
    }

    /// Defines every product in the simulator (what App Store Connect holds) and in the ledger's
    /// catalog (types, durations and prices the ledger classifies transactions by).
    @discardableResult
    public func defineCatalog() async throws -> StoryResult {
        var story = StoryRecorder(story: "catalog", userId: "", headline: "The catalog: one product of each kind", client: client, printer: printer)
        // The simulator knows the prices too: StoreKit 2 transactions carry Apple's price.
        let products: [(id: String, type: String, duration: String?, price: String)] = [
            (Product.coins, "consumable", nil, "0.99"),
            (Product.levelPack, "non_consumable", nil, "2.99"),
            (Product.noAds, "non_consumable", nil, "1.99"),
            (Product.proMonthly, "auto_renewable", "P1M", "4.99"),
            (Product.seasonPass, "non_renewing", "P1M", "9.99"),
        ]
        for product in products {
            var simulated: [String: DemoJSON] = ["type": .string(product.type)]
            if let duration = product.duration { simulated["duration"] = .string(duration) }
            var catalog = simulated
            simulated["price"] = .string(product.price)
            simulated["currency"] = "USD"
            try await story.simulator("simulator-product", "Define \(product.id) (\(product.type)) in the App Store", .PUT,
                                      "/admin/apps/\(client.bundleId)/products/\(product.id)", .object(simulated))
            catalog["prices"] = ["USD": .string(product.price)]
            try await story.ledger("ledger-product", "Define \(product.id) in the ledger's catalog", .PUT,
                                   "/v1/apps/\(client.bundleId)/products/\(product.id)", .object(catalog))
        }
        return story.result
    }
}

extension DemoStories {
    /// Readable lines for where a story left its user: what they own, balances, subscriptions, periods.
    public static func summary(of result: StoryResult) -> [String] {
        StoryRecorder.summary(entitlements: result.entitlements, balances: result.balances, periods: result.periods)
    }
}
