import NIOHTTP1

extension DemoStories {
    /// A consumable bought 5 at a time, 3 used, then 3 more refused: only 2 are left.
    public func consumable(user: String = "alice") async throws -> StoryResult {
        var story = StoryRecorder(story: "consumable", userId: user, headline: "Consumable: \(user) buys 5 coins, uses 3, cannot use 3 more",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let bought = try await story.buy("buy", "\(user) buys 5 coins in the App Store", product: Product.coins, quantity: 5)
        try await story.ingest("ingest", "The app's server posts the receipt", receipt: bought.receipt, device: "phone", price: "0.99")
        try await story.ledger("consume", "The app uses 3 coins", .POST, "\(story.userPath)/consumptions",
                               ["productId": .string(Product.coins), "quantity": 3, "deviceId": "phone"], idempotent: true, expect: 201)
        try await story.ledger("overdraw", "The app tries to use 3 more: refused, only 2 left", .POST, "\(story.userPath)/consumptions",
                               ["productId": .string(Product.coins), "quantity": 3, "deviceId": "phone"], idempotent: true, expect: 409)
        return try await story.finish()
    }
}
