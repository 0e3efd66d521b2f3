import NIOHTTP1

extension DemoStories {
    /// An auto-renewable restored to a new device: the App Store lists each period again under a
    /// new transaction id that shares the period's web order. The ledger records them as facts and
    /// the fold counts one payment per web order: the audit keeps one purchase and one renewal.
    /// Its receipts are what the replay story replays.
    public func restoredSubscription(user: String = "frank") async throws -> StoryResult {
        var story = StoryRecorder(story: "restored-subscription", userId: user,
                                  headline: "Restore: \(user)'s subscription is restored to a new tablet; the restored periods are not paid twice",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let (bought, renewed) = try await story.subscribeAndRenewOnce(product: Product.proMonthly, price: "4.99")
        let restored = try await story.simulator("restore", "On a new tablet \(user) taps Restore: the App Store lists both periods again, under new ids",
                                                 .POST, "/admin/restores", ["userId": .string(user), "bundleId": .string(story.app)])
        guard let restoredReceipt = restored.body["receipt"]?.string else {
            throw DemoError(message: "the simulator's restore answer has no receipt: \(restored.body)")
        }
        try await story.ingest("ingest-restore", "The tablet's receipt is posted: two restores, no new payment", receipt: restoredReceipt, device: "tablet")
        try await story.ledger("audit", "The audit trail of \(user): one purchase and one renewal (sandbox, as the simulator is)", .GET,
                               "/v1/audit/events?environment=sandbox&userId=\(user)&minPosition=\(story.position)")
        story.result.receipts = [
            StoryResult.PostedReceipt(deviceId: "phone", receipt: bought, price: "4.99"),
            StoryResult.PostedReceipt(deviceId: "phone", receipt: renewed, price: nil),
            StoryResult.PostedReceipt(deviceId: "tablet", receipt: restoredReceipt, price: nil),
        ]
        return try await story.finish()
    }
}
