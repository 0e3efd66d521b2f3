import Foundation
import NIOHTTP1

extension DemoStories {
    /// The app's own server follows the ledger: it registers a webhook endpoint and reads the change
    /// feed, and learns of a renewal no device posted and of a refund, both brought by Apple's
    /// notifications, signed by the ledger.
    public func following(user: String = "heidi") async throws -> StoryResult {
        guard let appServer, let appServerBase else { throw DemoError(message: "the following story needs the app's server (DemoAppServer)") }
        var story = StoryRecorder(story: "following", userId: user,
                                  headline: "Following: the app's server reads the change feed and receives signed webhooks of \(user)'s renewal and refund",
                                  client: client, printer: printer)
        try await story.ensureSimulatorUser()
        let notifications = "\(client.ledgerBase)/v1/apps/\(client.bundleId)/notifications"
        try await story.simulator("notification-url", "App Store Connect: the app's notifications (version 2) go to the ledger", .PUT,
                                  "/admin/apps/\(client.bundleId)", ["notificationURL": .string(notifications)])
        let added = try await story.ledger("webhook", "The app's server registers its webhook endpoint (the secret is shown this once)", .POST,
                                           "/v1/apps/\(client.bundleId)/webhooks", ["url": .string("\(appServerBase)/webhooks")], expect: 201)
        guard let endpoint = added.body["id"]?.string, let secret = added.body["secret"]?.string, let start = added.body["position"]?.int else {
            throw DemoError(message: "adding the webhook endpoint answered \(added.body)")
        }
        appServer.trust(secret)

        let bought = try await story.simulator("buy", "\(user) subscribes to pro_monthly with StoreKit 2", .POST, "/admin/purchases",
                                               ["userId": .string(user), "bundleId": .string(client.bundleId), "productId": .string(Product.proMonthly)],
                                               expect: 201)
        guard let signed = bought.body["signedTransaction"]?.string, let transaction = bought.body["transaction"]?["transactionId"]?.string else {
            throw DemoError(message: "the simulator's purchase answer has no signedTransaction: \(bought.body)")
        }
        try await story.ledger("post-signed", "The app's server posts the signed transaction", .POST, "/v1/apps/\(client.bundleId)/transactions",
                               ["userId": .string(user), "deviceId": "phone", "signedTransaction": .string(signed)])
        try await story.notification("subscribed", "Apple notifies the ledger: SUBSCRIBED", type: "SUBSCRIBED", transaction: transaction)
        try await story.simulator("advance", "The App Store's clock moves 6 minutes: a renewal no device posts", .POST, "/admin/clock/advance", ["minutes": 6])
        let renewal = try await story.notification("did-renew", "Apple notifies the ledger: DID_RENEW", type: "DID_RENEW", transaction: nil, user: user)
        try await story.simulator("cancel", "Apple support refunds the renewal \(renewal)", .POST, "/admin/transactions/\(renewal)/cancel", ["reason": 0])
        try await story.notification("refund", "Apple notifies the ledger: REFUND", type: "REFUND", transaction: renewal)

        // The feed, from where the endpoint started, long-polled until the refund is in it.
        var cursor = String(start)
        var told: [String] = []
        let deadline = ContinuousClock.now + .seconds(30)
        while !told.contains("refund"), ContinuousClock.now < deadline {
            let page = try await client.ledger(.GET, "/v1/apps/\(client.bundleId)/changes?after=\(cursor)&limit=100&wait=5")
            for change in page.body["changes"]?.array ?? [] where change["userId"]?.string == user {
                told.append(change["type"]?.string ?? "?")
            }
            cursor = String(page.body["position"]?.int ?? 0)
            if page.status != 200 { break }
        }
        try story.record("feed", "The app's server follows GET …/changes (long poll): \(told.joined(separator: ", "))",
                         "GET /v1/apps/\(client.bundleId)/changes?after=\(start)&wait=5", nil,
                         DemoAnswer(status: told == ["purchase", "renewal", "refund"] ? 200 : 500, body: ["changes": .array(told.map { .string($0) })],
                                    headers: [:]),
                         expect: 200)

        // The webhooks of the same changes, each signature checked by the app's server.
        let arrived = ContinuousClock.now + .seconds(30)
        var hooks: [String] = []
        while ContinuousClock.now < arrived {
            hooks = appServer.webhooks.filter { $0.signatureVerified && $0.body.contains("\"userId\":\"\(user)\"") }
                .compactMap { DemoJSON(data: Data($0.body.utf8))["type"]?.string }
            if hooks.contains("refund") { break }
            try await Task.sleep(for: .milliseconds(100))
        }
        let unverified = appServer.webhooks.filter { !$0.signatureVerified }.count
        try story.record("webhooks", "The app's server received, signature checked: \(hooks.joined(separator: ", "))",
                         "POST \(appServerBase)/webhooks (sent by the ledger)", nil,
                         DemoAnswer(status: hooks == ["purchase", "renewal", "refund"] && unverified == 0 ? 200 : 500,
                                    body: ["webhooks": .array(hooks.map { .string($0) }), "unverified": .number(Double(unverified))], headers: [:]),
                         expect: 200)
        try await story.ledger("deliveries", "Every attempt and the app server's answer, as `ledger webhooks deliveries` lists them", .GET,
                               "/v1/apps/\(client.bundleId)/webhooks/\(endpoint)/deliveries")
        try await story.ledger("webhook-off", "The endpoint removed (the other stories send none)", .DELETE, "/v1/apps/\(client.bundleId)/webhooks/\(endpoint)")
        try await story.simulator("notifications-off", "App Store Connect: notifications off again", .PUT,
                                  "/admin/apps/\(client.bundleId)", ["notificationURL": ""])
        return try await story.finish()
    }
}
