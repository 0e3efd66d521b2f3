import NIOHTTP1

extension DemoStories {
    /// A non-renewing subscription bought twice: the second period starts where the first ends.
    /// The App Store never restores these; the ledger restores both periods to a new device.
    public func nonRenewing(user: String = "dave") async throws -> StoryResult {
        var story = StoryRecorder(story: "non-renewing", userId: user,
                                  headline: "Non-renewing: \(user) buys a one-month season pass twice, then gets it on a new laptop",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let first = try await story.buy("buy", "\(user) buys the season pass (P1M)", product: Product.seasonPass)
        try await story.ingest("ingest", "The app's server posts the receipt", receipt: first.receipt, device: "phone", price: "9.99")
        let second = try await story.buy("buy-again", "\(user) buys another month right away", product: Product.seasonPass)
        try await story.ingest("ingest-again", "Posted: the second month stacks after the first", receipt: second.receipt, device: "phone", price: "9.99")
        let at = try await story.simulatorNow()
        try await story.ledger("periods", "The periods, back to back", .GET, "\(story.userPath)/subscriptions?minPosition=\(story.position)&at=\(at)")
        try await story.ledger("restore-device", "\(user)'s new laptop asks the ledger to restore: both periods are delivered", .POST,
                               "\(story.userPath)/devices/laptop/restore", idempotent: true)
        return try await story.finish()
    }
}
