import NIOHTTP1

extension DemoStories {
    /// Apple support refunds a purchase; the next receipt carries the cancellation, and the ledger
    /// takes back what the purchase gave.
    public func refund(user: String = "erin") async throws -> StoryResult {
        var story = StoryRecorder(story: "refund", userId: user,
                                  headline: "Refund: \(user) buys no-ads, Apple refunds it, the ledger takes it back",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let bought = try await story.buy("buy", "\(user) buys no-ads", product: Product.noAds)
        try await story.ingest("ingest", "The app's server posts the receipt: \(user) owns no-ads", receipt: bought.receipt, device: "phone", price: "1.99")
        let transaction = bought.transaction["transactionId"]?.string ?? ""
        try await story.simulator("cancel", "Apple support refunds transaction \(transaction)", .POST,
                                  "/admin/transactions/\(transaction)/cancel", ["reason": 1])
        let receipt = try await story.freshReceipt("receipt", "The app's server fetches the user's current receipt")
        try await story.ingest("ingest-refund", "Posted: the cancellation is recorded; the fold reads it as a refund", receipt: receipt, device: "phone")
        let at = try await story.simulatorNow()
        try await story.ledger("entitlements", "No-ads is no longer owned", .GET, "\(story.userPath)/entitlements?minPosition=\(story.position)&at=\(at)")
        try await story.audit("audit", "Finance sees the purchase (revoked) and the refund", product: Product.noAds) { rows in
            rows.contains { $0["event"]?.string == "refund" }
        }
        return try await story.finish()
    }
}
