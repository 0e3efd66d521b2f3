import NIOHTTP1

extension DemoStories {
    /// An auto-renewable on the sandbox's accelerated clock (a month lasts 5 minutes): it renews
    /// while the clock moves, and lapses after the sandbox's sixth and last renewal.
    public func autoRenewable(user: String = "carol") async throws -> StoryResult {
        var story = StoryRecorder(story: "auto-renewable", userId: user,
                                  headline: "Auto-renewable: \(user) subscribes monthly; the sandbox renews it, then it lapses",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        _ = try await story.subscribeAndRenewOnce(product: Product.proMonthly, price: "4.99")
        var at = try await story.simulatorNow()
        try await story.ledger("active", "Pro is active at the App Store's time", .GET,
                               "\(story.userPath)/entitlements?minPosition=\(story.position)&at=\(at)")
        try await story.simulator("advance-past", "The clock moves 40 more minutes: past the sixth and last sandbox renewal", .POST,
                                  "/admin/clock/advance", ["minutes": 40])
        let lapsed = try await story.freshReceipt("receipt-lapsed", "The app's server fetches the current receipt")
        try await story.ingest("ingest-lapsed", "Posted: the remaining renewals are recorded", receipt: lapsed, device: "phone")
        at = try await story.simulatorNow()
        try await story.ledger("lapsed", "Pro has lapsed at the App Store's time", .GET,
                               "\(story.userPath)/entitlements?minPosition=\(story.position)&at=\(at)")
        return try await story.finish()
    }
}
