import Foundation
import NIOHTTP1

extension DemoStories {
    /// A non-consumable bought, bought again (StoryKit answers with a restore, and nobody is
    /// charged twice), then restored to a second device.
    public func nonConsumable(user: String = "bob") async throws -> StoryResult {
        var story = StoryRecorder(story: "non-consumable", userId: user,
                                  headline: "Non-consumable: \(user) buys the level pack, buys it again, restores it on a tablet",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let bought = try await story.buy("buy", "\(user) buys the level pack", product: Product.levelPack)
        try await story.ingest("ingest", "The app's server posts the receipt", receipt: bought.receipt, device: "phone", price: "2.99")
        let again = try await story.buy("buy-again", "\(user) taps buy again: the App Store answers with a restore, no charge",
                                        product: Product.levelPack)
        try await story.ingest("ingest-again", "The new receipt is recorded as a restore, not a second purchase",
                               receipt: again.receipt, device: "phone", price: "2.99")
        let original = bought.transaction["transactionId"]?.string ?? ""
        try await story.audit("audit", "Finance sees one purchase row for the level pack", product: Product.levelPack) { rows in
            rows.contains { $0["transactionId"]?.string == original }
        }
        try await story.ledger("restore-device", "\(user)'s tablet asks the ledger to restore everything", .POST,
                               "\(story.userPath)/devices/tablet/restore", idempotent: true)
        return try await story.finish()
    }
}

extension StoryRecorder {
    /// Reads the user's audit rows (finance scope) once the audit trail has caught up with the
    /// story's last write (`minPosition`). A fresh database's audit trail may still be building
    /// (a retryable 503), so that is waited out for up to 10 seconds; `ready` says the rows are complete.
    @discardableResult
    mutating func audit(_ name: String, _ title: String, product: String, until ready: ([DemoJSON]) -> Bool) async throws -> DemoAnswer {
        let path = "/v1/audit/events?environment=sandbox&userId=\(user)&productId=\(product)&minPosition=\(position)"
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let answer = try await client.ledger(.GET, path)
            let retryable = answer.status == 503 && answer.body["error"]?["retryable"]?.bool == true
            if answer.status == 200 ? ready(answer.body["events"]?.array ?? []) : !retryable { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        return try await ledger(name, title, .GET, path)
    }
}
