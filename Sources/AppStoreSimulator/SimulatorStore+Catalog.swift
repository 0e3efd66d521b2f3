import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Apps, products, users

    @discardableResult
    func putApp(bundleId: String, sharedSecret: String?, notificationURL: String? = nil) throws -> App {
        try Self.requireIdentifier(bundleId, "bundle id")
        var app = apps[bundleId] ?? App(bundleId: bundleId, sharedSecret: Self.randomSecret(), products: [:])
        if let sharedSecret {
            guard !sharedSecret.isEmpty else { throw SimulatorError.badRequest("sharedSecret must not be empty") }
            app.sharedSecret = sharedSecret
        }
        if let notificationURL {
            guard notificationURL.isEmpty || URL(string: notificationURL)?.host != nil else {
                throw SimulatorError.badRequest("notificationURL '\(notificationURL)' is not an http(s) URL (\"\" turns notifications off)")
            }
            app.notificationURL = notificationURL.isEmpty ? nil : notificationURL
        }
        apps[bundleId] = app
        return app
    }

    func app(_ bundleId: String) throws -> App {
        guard let app = apps[bundleId] else {
            throw SimulatorError.notFound("no app '\(bundleId)': define a product with PUT /admin/apps/\(bundleId)/products/{productId}")
        }
        return app
    }

    /// Defines or replaces a product; the app is created (with a random shared secret) if it is new.
    func putProduct(bundleId: String, _ product: SimulatedProduct) throws -> SimulatedProduct {
        try Self.requireIdentifier(product.productId, "product id")
        switch product.type {
        case .unknown:
            throw SimulatorError.badRequest("type must be one of \(Self.sellableTypes)")
        case .autoRenewable, .nonRenewing:
            guard product.duration != nil else {
                throw SimulatorError.badRequest("a \(product.type.rawValue) product needs a duration: one of \(SubscriptionDuration.allCases.map(\.rawValue).joined(separator: ", "))")
            }
        case .consumable, .nonConsumable, .freeSubscription:
            guard product.duration == nil else {
                throw SimulatorError.badRequest("a \(product.type.rawValue) product has no duration: leave it out")
            }
        }
        try Self.checkSubscriptionOptions(product)
        if let price = product.price, SimulatedProduct.milliunits(price) == nil {
            throw SimulatorError.badRequest("price '\(price)' is not a decimal amount with at most three places, such as \"0.99\"")
        }
        if let currency = product.currency, !(currency.count == 3 && currency.allSatisfy { $0.isASCII && $0.isUppercase }) {
            throw SimulatorError.badRequest("currency '\(currency)' is not an ISO 4217 code such as USD")
        }
        for (storefront, local) in product.storefrontPrices.sorted(by: { $0.key < $1.key }) {
            guard CountryCodes.alpha2(fromAlpha3: storefront) != nil else {
                throw SimulatorError.badRequest("storefrontPrices: '\(storefront)' is not an ISO 3166-1 alpha-3 country code such as FRA")
            }
            guard SimulatedProduct.milliunits(local.price) != nil, local.currency.count == 3, local.currency.allSatisfy({ $0.isASCII && $0.isUppercase }) else {
                throw SimulatorError.badRequest("storefrontPrices.\(storefront): give a price such as \"1.09\" and an ISO 4217 currency such as EUR")
            }
        }
        var app = try apps[bundleId] ?? putApp(bundleId: bundleId, sharedSecret: nil)
        app.products[product.productId] = product
        apps[bundleId] = app
        return product
    }

    /// Creates a test user; without an id one is made up (`user-1`, `user-2`, …).
    func createUser(_ requested: String?, storefront: String? = nil) throws -> String {
        if let storefront, CountryCodes.alpha2(fromAlpha3: storefront) == nil {
            throw SimulatorError.badRequest("storefront '\(storefront)' is not an ISO 3166-1 alpha-3 country code such as USA, FRA or JPN")
        }
        var userId: String
        if let requested {
            try Self.requireIdentifier(requested, "user id")
            guard !users.contains(requested) else { throw SimulatorError.conflict("test user '\(requested)' exists already") }
            userId = requested
        } else {
            userId = "user-\(nextUserNumber)"
            while users.contains(userId) {
                nextUserNumber += 1
                userId = "user-\(nextUserNumber)"
            }
            nextUserNumber += 1
        }
        users.insert(userId)
        if let storefront { storefronts[userId] = storefront }
        return userId
    }

    /// Makes `member` part of `organizer`'s family: from now on the member's receipts list the
    /// organizer's purchases of family-shareable products, past ones included. `false` when it was so already.
    func linkFamily(organizer: String, member: String) throws -> Bool {
        try requireUser(organizer)
        try requireUser(member)
        return try families.link(organizer: organizer, member: member)
    }
}
