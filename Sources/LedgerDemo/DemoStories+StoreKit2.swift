import Foundation
import NIOHTTP1

extension DemoStories {
    /// StoreKit 2: the app's server posts a signed transaction instead of a receipt, and Apple's
    /// App Store Server Notifications V2 bring the renewal and a refund, with no device involved.
    public func storeKit2(user: String = "grace") async throws -> StoryResult {
        var story = StoryRecorder(story: "storekit2", userId: user,
                                  headline: "StoreKit 2: \(user) subscribes; Apple's signed notifications bring the renewal and a refund",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let notifications = "\(client.ledgerBase)/v1/apps/\(client.bundleId)/notifications"
        try await story.simulator("notification-url", "App Store Connect: the app's notifications (version 2) go to the ledger", .PUT,
                                  "/admin/apps/\(client.bundleId)", ["notificationURL": .string(notifications)])
        let bought = try await story.simulator("buy", "\(user) subscribes to pro_monthly with StoreKit 2 (P1M: 5 minutes in the sandbox)", .POST,
                                               "/admin/purchases", ["userId": .string(user), "bundleId": .string(client.bundleId),
                                                                    "productId": .string(Product.proMonthly)], expect: 201)
        guard let signed = bought.body["signedTransaction"]?.string, let transaction = bought.body["transaction"]?["transactionId"]?.string else {
            throw DemoError(message: "the simulator's purchase answer has no signedTransaction: \(bought.body)")
        }
        try await story.ledger("post-signed", "The app's server posts Transaction.jwsRepresentation: its signature is verified here, and Apple's price recorded",
                               .POST, "/v1/apps/\(client.bundleId)/transactions",
                               ["userId": .string(user), "deviceId": "phone", "signedTransaction": .string(signed)])
        try await story.notification("subscribed", "Apple notifies the ledger: SUBSCRIBED (recorded for \(user); had it come before her post, it would have waited for it)",
                                     type: "SUBSCRIBED", transaction: transaction)
        try await story.simulator("advance", "The App Store's clock moves 6 minutes: one renewal, which no device posts", .POST,
                                  "/admin/clock/advance", ["minutes": 6])
        let renewal = try await story.notification("did-renew", "Apple notifies the ledger: DID_RENEW, recorded as the renewal",
                                                    type: "DID_RENEW", transaction: nil)
        let at = try await story.simulatorNow()
        try await story.ledger("entitlements", "pro_monthly runs to the renewed period's end, though no device posted anything", .GET,
                               "\(story.userPath)/entitlements?minPosition=\(story.position)&at=\(at)")
        try await story.simulator("cancel", "Apple support refunds the renewal \(renewal)", .POST, "/admin/transactions/\(renewal)/cancel", ["reason": 0])
        try await story.notification("refund", "Apple notifies the ledger: REFUND, recorded as the renewal's refund", type: "REFUND", transaction: renewal)
        try await story.audit("audit", "Finance sees the purchase and the renewal at Apple's own price (priceSource app_store), and the refund",
                              product: Product.proMonthly) { rows in
            rows.contains { $0["event"]?.string == "refund" } && rows.contains { $0["priceSource"]?.string == "app_store" }
        }
        try await story.simulator("notifications-off", "App Store Connect: notifications off again (the other stories post receipts)", .PUT,
                                  "/admin/apps/\(client.bundleId)", ["notificationURL": ""])
        return try await story.finish()
    }
}

extension StoryRecorder {
    /// Waits (up to 30 s) until the simulator has delivered a notification of `type` (about
    /// `transaction`, and recorded for `user`, when given) that this story has not seen, and records the ledger's answer to it;
    /// returns the transaction it was about.
    @discardableResult
    mutating func notification(_ name: String, _ title: String, type: String, transaction: String?, user: String? = nil) async throws -> String {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let listed = try await client.simulator(.GET, "/admin/notifications")
            let found = listed.body["notifications"]?.array.last { entry in
                entry["notificationType"]?.string == type && entry["delivered"]?.bool == true
                    && (transaction == nil || entry["transactionId"]?.string == transaction)
                    && (user == nil || entry["answer"]?.string.map { DemoJSON(data: Data($0.utf8))["userId"]?.string == user } == true)
                    && !seenNotifications.contains(entry["notificationUUID"]?.string ?? "")
            }
            if let found, let uuid = found["notificationUUID"]?.string, let about = found["transactionId"]?.string {
                seenNotifications.insert(uuid)
                let answer = (found["answer"]?.string).map { DemoJSON(data: Data($0.utf8)) } ?? .null
                if let written = answer["position"]?.int { position = max(position, written) }
                try record(name, title, "POST \(client.ledgerBase)/v1/apps/\(app)/notifications (sent by the App Store, \(type))",
                           nil, DemoAnswer(status: found["lastStatus"]?.int ?? 0, body: answer, headers: [:]), expect: 200)
                return about
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw DemoError(message: "the App Store simulator did not deliver a \(type) notification to the ledger within 30 seconds (see GET /admin/notifications)")
    }
}
