import AppStore
import AppStoreSimulator
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// Nothing Apple sent is lost: notifications Apple gave up delivering are recovered from its
/// notification history, once; Apple's refund questions are answered from the log; support finds
/// an order; an operator tests the webhook. Against the simulator, which plays Apple's Server API.
@Suite struct NotificationRecoveryTests {
    static let app = APIHarness.app
    static var webhookPath: String { "/v1/apps/\(app)/notifications" }

    // MARK: Gap-fill

    @Test func notificationsApplesGaveUpOnAreRecoveredOnceAndTheLedgerEqualsOneThatGotThemAll() async throws {
        let authority = try SimulatorCertificateAuthority()
        var configuration = LedgerServer.Configuration(host: "127.0.0.1", port: 0)
        configuration.health.syncStale = .seconds(2)
        try await APIHarness.run(server: configuration, authority: authority) { gap in
            // The reference ledger gets every notification, as it is sent.
            try await APIHarness.run("\(#function)-reference", authority: authority) { reference in
                for api in [gap, reference] {
                    try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99"], simulatorOptions: ["price": "0.99", "currency": "USD"])
                    try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "4.99"],
                                                simulatorOptions: ["price": "4.99", "currency": "USD"])
                    try await api.defineProduct("levels", type: "non_consumable", prices: ["USD": "2.99"],
                                                simulatorOptions: ["price": "2.99", "currency": "USD", "familyShareable": true])
                }
                _ = try await gap.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": gap.base + Self.webhookPath])
                try await gap.giveServerAPIKey()
                let sync = try #require(gap.appStoreLedger().syncNotifications)
                for environment in StoreEnvironment.allCases { _ = try await sync(app: Self.app, environment: environment) }
                #expect(try await Self.warnings(gap).isEmpty, "walked just now")

                var forwarded: Set<String> = []
                /// Apple's deliveries so far, each sent to the reference once (what the gap's ledger got, and what it never got).
                func forward() async throws {
                    for delivery in try await Self.settledDeliveries(gap) where forwarded.insert(delivery.uuid).inserted {
                        let answer = try await reference.postNotification(delivery.payload)
                        #expect(answer.status == 200, "\(answer.text)")
                    }
                }
                func post(_ user: String, _ jws: String) async throws {
                    for api in [gap, reference] {
                        let posted = try await api.postTransaction(user, device: "\(user)-phone", jws)
                        #expect(posted.status == 200, "\(posted.text)")
                    }
                }

                // Before the outage: purchases posted by devices, their notifications delivered.
                for user in ["ann", "org", "kid"] { _ = try await gap.simulator(.POST, "/admin/users", ["userId": user]) }
                _ = try await gap.simulator(.POST, "/admin/family", ["organizerUserId": "org", "memberUserId": "kid"])
                let coins = try await Self.purchase(gap, "ann", "coins", quantity: 4)
                try await post("ann", coins.jws)
                try await post("ann", try await Self.purchase(gap, "ann", "pro.monthly").jws)
                let levels = try await Self.purchase(gap, "org", "levels")
                try await post("org", levels.jws)
                for jws in try await gap.signedTransactions(of: "kid") { try await post("kid", jws) }
                for api in [gap, reference] {
                    let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/ann/consumptions", key: api.keys["ingest"],
                                                  json: ["productId": "coins", "quantity": 1, "deviceId": "ann-phone"])
                    #expect(used.status == 201, "\(used.text)")
                }
                try await forward()

                // The ledger is down: Apple renews, refunds half the coins, refunds the family's
                // levels (and revokes the member's copy); every try fails until it gives up.
                _ = try await gap.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": "http://127.0.0.1:1" + Self.webhookPath])
                _ = try await gap.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
                _ = try await gap.simulator(.POST, "/admin/transactions/\(coins.transactionId)/cancel", ["reason": 1, "percentage": 50000])
                _ = try await gap.simulator(.POST, "/admin/transactions/\(levels.transactionId)/cancel", ["reason": 0])
                try await forward()
                let lost = try await Self.settledDeliveries(gap).filter { !$0.delivered }
                #expect(lost.map(\.type).sorted() == ["DID_RENEW", "REFUND", "REFUND", "REVOKE"], "\(lost.map(\.type))")
                _ = try await gap.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": gap.base + Self.webhookPath])

                // Back up: /health says the walk is behind until it runs.
                try await Task.sleep(for: .seconds(3))
                let behind = try await Self.warnings(gap)
                #expect(behind.contains { $0.contains(Self.app) && $0.contains("sandbox") }, "\(behind)")

                let report = try await sync(app: Self.app, environment: .sandbox)
                _ = try await sync(app: Self.app, environment: .production)
                #expect(report.recovered == 4 && report.kinds == ["DID_RENEW": 1, "REFUND": 2, "REVOKE": 1], "\(report)")
                #expect(report.seen == forwarded.count && report.refused.isEmpty, "\(report)")
                #expect(try await Self.warnings(gap).isEmpty)

                // A notification that raced its device's post waits on the app's stream until the
                // servers' sweep hands it over (after its grace); sweep as of an hour on, as they would.
                _ = try await PostgresLedger(client: gap.client, logger: APIHarness.logger).waitingNotifications.sweep(now: Date() + 3_600)

                // Every notification once, and the same state as the ledger that got them all.
                let counts = try await Self.notificationCounts(gap)
                #expect(Set(counts.keys) == forwarded && counts.values.allSatisfy { $0 == 1 },
                        "\(counts); forwarded but not in a user's stream: \(forwarded.subtracting(counts.keys))")
                for user in ["ann", "org", "kid"] {
                    let (recovered, complete) = (try await Self.view(gap, user), try await Self.view(reference, user))
                    #expect(recovered == complete, "\(user): recovered \(recovered)\nreference \(complete)")
                }
                #expect(try await Self.view(gap, "ann")["balances"]?.contains("\"balance\":1") == true, "4 bought, 1 used, 2 refunded")

                // A second walk records nothing; Apple's own late delivery of a recovered one is a duplicate.
                let again = try await sync(app: Self.app, environment: .sandbox)
                #expect(again.recovered == 0 && again.seen == report.seen, "\(again)")
                let late = try await gap.postNotification(try #require(lost.first).payload)
                #expect(late.json["outcome"] as? String == "duplicate", "\(late.text)")
                #expect(try await Self.notificationCounts(gap) == counts)
            }
        }
    }

    // MARK: Refund questions

    @Test func aConsentingUsersRefundRequestIsAnsweredWithTheLogsFiguresAndOneWithoutConsentIsNot() async throws {
        try await SignedPayloadRoutesTests.run { api, _ in
            try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99"], simulatorOptions: ["price": "0.99", "currency": "USD"])
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + Self.webhookPath])
            try await api.giveServerAPIKey()
            try await AppRegistry(client: api.client, logger: APIHarness.logger).setConsumptionAnswerSettings(
                .init(answering: true, refundPreference: "GRANT_PRORATED", sampleContentProvided: true), of: Self.app
            )
            var bought: [String: String] = [:]
            for (user, quantity, used, consent) in [("ann", 4, 2, true), ("bob", 2, 1, nil), ("cat", 2, 0, true)] as [(String, Int, Int, Bool?)] {
                _ = try await api.simulator(.POST, "/admin/users", ["userId": user])
                let purchase = try await Self.purchase(api, user, "coins", quantity: quantity)
                bought[user] = purchase.transactionId
                #expect(try await api.postTransaction(user, device: "phone", purchase.jws).status == 200)
                if used > 0 {
                    let consumed = try await api.send(.POST, "/v1/apps/\(Self.app)/users/\(user)/consumptions", key: api.keys["ingest"],
                                                      json: ["productId": "coins", "quantity": used, "deviceId": "phone"])
                    #expect(consumed.status == 201, "\(consumed.text)")
                }
                if let consent {
                    let reported = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/\(user)/consumption-consent", key: api.keys["ingest"],
                                                      json: ["consented": consent])
                    #expect(reported.status == 200 && reported.json["changed"] as? Bool == true, "\(reported.text)")
                }
                let asked = try await api.simulator(.POST, "/admin/transactions/\(purchase.transactionId)/refund-request", ["reason": "UNINTENDED_PURCHASE"])
                #expect(asked.status == 202, "\(asked.text)")
            }
            try await Self.waitForDelivered(api, type: "CONSUMPTION_REQUEST", count: 3)

            // Before the leading server's pass: what it is about to send.
            let pending = try await Self.answer(api, "ann")
            #expect(pending["state"] as? String == "pending" && pending["consumptionPercentage"] as? Int == 50_000, "\(pending)")

            let answering = api.appStoreLedger().answerConsumptionRequests
            let pass = await answering.sweep()
            #expect(pass.accepted == 2 && pass.notAnswered == 1 && pass.failed == 0 && pass.refused == 0, "\(pass)")
            let sent = try await Self.consumptionReceived(api)
            #expect(sent.count == 2, "\(sent)")
            let ann = try #require(sent[bought["ann"]!], "\(sent)")
            #expect(ann["customerConsented"] as? Bool == true && ann["deliveryStatus"] as? String == "DELIVERED", "\(ann)")
            #expect(ann["consumptionPercentage"] as? Int == 50_000 && ann["refundPreference"] as? String == "GRANT_PRORATED", "two of four used: \(ann)")
            #expect(ann["sampleContentProvided"] as? Bool == true)
            let cat = try #require(sent[bought["cat"]!], "\(sent)")
            #expect(cat["consumptionPercentage"] as? Int == 0 && cat["refundPreference"] as? String == "GRANT_FULL",
                    "prorated on nothing used is a full refund (Apple refuses GRANT_PRORATED at 0): \(cat)")

            let answered = try await Self.answer(api, "ann")
            #expect(answered["state"] as? String == "accepted" && answered["position"] is Int && answered["sentAt"] is String, "\(answered)")
            let bob = try await api.send(.GET, "/v1/apps/\(Self.app)/users/bob/consumption-requests", key: api.keys["read"])
            let bobAnswer = (bob.json["requests"] as? [[String: Any]])?.first?["answer"] as? [String: Any] ?? [:]
            #expect(bob.json["customerConsented"] is NSNull, "\(bob.text)")
            #expect(bobAnswer["state"] as? String == "not_answered" && (bobAnswer["detail"] as? String)?.contains("consent") == true, "\(bob.text)")

            // Answered once: another pass sends nothing; a withdrawn consent is recorded and said.
            let second = await answering.sweep()
            #expect(second.accepted == 0 && second.refused == 0 && second.failed == 0, "\(second)")
            #expect(try await Self.consumptionReceived(api).count == 2)
            let withdrawn = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/bob/consumption-consent", key: api.keys["ingest"],
                                               json: ["consented": false])
            #expect(withdrawn.json["changed"] as? Bool == true)
            let stillNot = try await Self.answer(api, "bob")
            #expect((stillNot["detail"] as? String)?.contains("did not consent") == true, "\(stillNot)")
            let repeated = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/bob/consumption-consent", key: api.keys["ingest"],
                                              json: ["consented": false])
            #expect(repeated.json["changed"] as? Bool == false, "as recorded: nothing new")
            let notJSON = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/bob/consumption-consent", key: api.keys["ingest"],
                                             json: ["consented": "yes"])
            #expect(notJSON.status == 400, "\(notJSON.text)")
        }
    }

    // MARK: Orders, statuses, test notifications

    @Test func supportLooksAnOrderUpAndEachRefusalSaysWhatToDo() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APIHarness.run(productionSimulator: true, authority: authority) { api in
            try await api.defineProduct("levels", type: "non_consumable", prices: ["USD": "2.99"], simulatorOptions: ["price": "2.99", "currency": "USD"])
            _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": "ann"])
            let bought = try await api.productionSimulator(.POST, "/admin/purchases", ["userId": "ann", "bundleId": Self.app, "productId": "levels"])
            let order = try #require(bought.json["orderId"] as? String, "\(bought.text)")
            let transaction = try #require((bought.json["transaction"] as? [String: Any])?["transactionId"] as? String)
            let path = "/v1/apps/\(Self.app)/orders/\(order)"

            let noKey = try await api.send(.GET, path, key: api.keys["read"])
            #expect(noKey.status == 409 && noKey.errorCode == "no_server_api_key" && noKey.errorMessage?.contains("ledger apps appstore-key") == true,
                    "\(noKey.text)")
            try await api.giveServerAPIKey()

            let unheld = try await api.send(.GET, path, key: api.keys["read"])
            let items = unheld.json["transactions"] as? [[String: Any]] ?? []
            #expect(unheld.status == 200 && items.count == 1 && items.first?["transactionId"] as? String == transaction, "\(unheld.text)")
            #expect(items.first?["userId"] is NSNull && items.first?["price"] as? String == "2.99", "no user holds it yet: \(unheld.text)")

            let receipt = try await api.productionSimulator(.GET, "/admin/users/ann/apps/\(Self.app)")
            let posted = try await api.ingest("ann", device: "phone", receipt: try #require(receipt.json["receipt"] as? String))
            #expect(posted.status == 200, "\(posted.text)")
            let held = try await api.send(.GET, path, key: api.keys["read"])
            #expect((held.json["transactions"] as? [[String: Any]])?.first?["userId"] as? String == "ann", "\(held.text)")

            let unknown = try await api.send(.GET, "/v1/apps/\(Self.app)/orders/MZZZZZZZZZ", key: api.keys["read"])
            #expect(unknown.status == 404 && unknown.errorCode == "order_not_found" && unknown.errorMessage?.contains("e-mail receipt") == true,
                    "\(unknown.text)")
            let malformed = try await api.send(.GET, "/v1/apps/\(Self.app)/orders/M-1", key: api.keys["read"])
            #expect(malformed.status == 400, "\(malformed.text)")
            #expect(try await api.send(.GET, path, key: api.keys["ingest"]).status == 403)

            // Apple unreachable: a refusal to retry, within the client's deadline.
            let away = api.appStoreLedger(productionURL: "http://127.0.0.1:1", timeout: .seconds(5)).appStoreQueries
            let started = ContinuousClock.now
            await #expect {
                try await away.order(app: Self.app, orderId: order)
            } throws: { error in
                guard let error = error as? AppStoreQueryError else { return false }
                return error.code == .appStoreUnavailable && error.message.contains("try again")
            }
            #expect(ContinuousClock.now - started < .seconds(20))
        }
    }

    @Test func statusesRecordWhatIsNewsAndATestNotificationIsReportedArrivedOrNot() async throws {
        try await SignedPayloadRoutesTests.run { api, _ in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "4.99"],
                                        simulatorOptions: ["price": "4.99", "currency": "USD", "group": "pro"])
            let queries = api.appStoreLedger().appStoreQueries
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "ann"])
            let bought = try await Self.purchase(api, "ann", "pro.monthly")
            #expect(try await api.postTransaction("ann", device: "phone", bought.jws).status == 200)

            await #expect {
                try await queries.subscriptionStatuses(app: Self.app, user: "ann")
            } throws: { ($0 as? AppStoreQueryError)?.code == .noServerAPIKey }
            try await api.giveServerAPIKey()

            // The renewal's notification never came (no URL set): the ledger still has the first period.
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            let statuses = try await queries.subscriptionStatuses(app: Self.app, user: "ann")
            let subscription = try #require(statuses.subscriptions.first, "\(statuses)")
            #expect(statuses.subscriptions.count == 1 && !subscription.group.isEmpty && subscription.originalTransactionId == bought.transactionId)
            #expect(subscription.apple.state == "active" && subscription.apple.autoRenew == true, "\(subscription)")
            #expect(statuses.recorded >= 1 && subscription.agrees, "the renewal is recorded, and then both agree: \(statuses)")
            #expect(subscription.ledger?.expiresDate == subscription.apple.expiresDate)
            let again = try await queries.subscriptionStatuses(app: Self.app, user: "ann")
            #expect(again.recorded == 0, "nothing new the second time")
            await #expect {
                try await queries.subscriptionStatuses(app: Self.app, user: "nobody")
            } throws: { ($0 as? ReadError)?.code == .unknownUser }

            // No URL in App Store Connect: Apple says so.
            await #expect {
                try await queries.testNotification(app: Self.app, environment: .sandbox, wait: .seconds(5))
            } throws: { error in
                (error as? AppStoreQueryError).map { $0.code == .appStoreRefused && $0.message.contains("App Store Connect") } ?? false
            }
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + Self.webhookPath])
            var arrived = try await queries.testNotification(app: Self.app, environment: .sandbox, wait: .seconds(20), poll: .milliseconds(100))
            var asked = 1
            // The simulator gives a try 10 s, as Apple does; under the whole suite on two cores the
            // webhook once took longer (a long poll of the same run took 16 s). An operator who
            // reads NO_RESPONSE asks again; two more asks tell a slow moment from a webhook that
            // never answers.
            while arrived.recorded == nil && arrived.attempts.last?.result == "NO_RESPONSE" && asked < 3 {
                arrived = try await queries.testNotification(app: Self.app, environment: .sandbox, wait: .seconds(20), poll: .milliseconds(100))
                asked += 1
            }
            #expect(arrived.recorded != nil && arrived.attempts.last?.result == "SUCCESS",
                    "after \(asked) asks: \(arrived.verdict) \(arrived.attempts)")
            #expect(arrived.verdict.contains("recorded it"))

            // A URL that does not reach the ledger: Apple's tries fail (a refused connection is a
            // NO_RESPONSE once the simulator's 10 s per try ran out), and the report says where to look.
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": "http://127.0.0.1:1" + Self.webhookPath])
            let lost = try await queries.testNotification(app: Self.app, environment: .sandbox, wait: .seconds(25), poll: .milliseconds(200))
            #expect(lost.recorded == nil && lost.attempts.first?.result == "NO_RESPONSE", "\(lost.attempts) \(lost.verdict)")
            #expect(lost.verdict.contains("could not deliver") && lost.verdict.contains("notification URL"), "\(lost.verdict)")
        }
    }

    // MARK: Helpers

    /// A purchase in the simulator: its transaction id and its signed transaction.
    static func purchase(_ api: APIHarness, _ user: String, _ product: String, quantity: Int = 1) async throws -> (transactionId: String, jws: String) {
        let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": user, "bundleId": app, "productId": product, "quantity": quantity])
        guard let jws = bought.json["signedTransaction"] as? String,
              let id = (bought.json["transaction"] as? [String: Any])?["transactionId"] as? String
        else { throw HarnessError(message: "the simulator did not sell \(product) to \(user): \(bought.text)") }
        return (id, jws)
    }

    struct Delivery: Sendable {
        let uuid: String
        let type: String
        let payload: String
        let delivered: Bool
    }

    /// The simulator's deliveries once each was delivered or given up (every try made), in the order sent.
    static func settledDeliveries(_ api: APIHarness, tries: Int = 4) async throws -> [Delivery] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let listed = try await api.simulator(.GET, "/admin/notifications").json["notifications"] as? [[String: Any]] ?? []
            let settled = listed.allSatisfy { $0["delivered"] as? Bool == true || ($0["attempts"] as? Int ?? 0) >= tries }
            if settled || ContinuousClock.now > deadline {
                return listed.compactMap { item in
                    guard let uuid = item["notificationUUID"] as? String, let type = item["notificationType"] as? String,
                          let payload = item["signedPayload"] as? String
                    else { return nil }
                    return Delivery(uuid: uuid, type: type, payload: payload, delivered: item["delivered"] as? Bool == true)
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }

    static func waitForDelivered(_ api: APIHarness, type: String, count: Int) async throws {
        let delivered = try await settledDeliveries(api).filter { $0.type == type && $0.delivered }
        guard delivered.count == count else { throw HarnessError(message: "\(delivered.count) \(type) delivered, not \(count)") }
    }

    /// `/health`'s warnings.
    static func warnings(_ api: APIHarness) async throws -> [String] {
        try await api.send(.GET, "/health", key: nil).json["warnings"] as? [String] ?? []
    }

    /// How often each notification is on a user's stream.
    static func notificationCounts(_ api: APIHarness) async throws -> [String: Int] {
        let rows = try await api.client.query("""
            SELECT data ->> 'notificationUUID', count(*)::int FROM ledger.events
            WHERE event_type = 'AppStoreNotificationReceived.v1' AND stream_id LIKE 'user/%' GROUP BY 1
            """)
        var counts: [String: Int] = [:]
        for try await (uuid, count) in rows.decode((String, Int).self) { counts[uuid] = count }
        return counts
    }

    /// What a user has by the ledger's reads and audit trail, at the log's head, without positions
    /// and times of reading: comparable between two ledgers.
    static func view(_ api: APIHarness, _ user: String) async throws -> [String: String] {
        var head = 0
        for try await value in try await api.client.query("SELECT coalesce(max(\"position\"), 0)::int FROM ledger.events").decode(Int.self) { head = value }
        var view: [String: String] = [:]
        for read in ["entitlements", "balances", "subscriptions"] {
            let answer = try await api.send(.GET, "/v1/apps/\(app)/users/\(user)/\(read)?minPosition=\(head)", key: api.keys["read"])
            view[read] = try canonical(answer.json)
        }
        let rows = try await api.audit(user: user, after: head)
            .map { $0.filter { !["position", "recordedAt"].contains($0.key) } }
            .sorted { "\($0["transactionId"] ?? "")\($0["event"] ?? "")" < "\($1["transactionId"] ?? "")\($1["event"] ?? "")" }
        view["audit"] = try canonical(rows)
        return view
    }

    static func canonical(_ value: Any) throws -> String {
        func strip(_ value: Any) -> Any {
            if let object = value as? [String: Any] {
                return object.filter { !["position", "at", "recordedAt"].contains($0.key) }.mapValues(strip)
            }
            if let array = value as? [Any] { return array.map(strip) }
            return value
        }
        return String(decoding: try JSONSerialization.data(withJSONObject: strip(value), options: [.sortedKeys]), as: UTF8.self)
    }

    /// The ledger's answer to the user's latest refund request.
    static func answer(_ api: APIHarness, _ user: String) async throws -> [String: Any] {
        let read = try await api.send(.GET, "/v1/apps/\(app)/users/\(user)/consumption-requests", key: api.keys["read"])
        return (read.json["requests"] as? [[String: Any]])?.first?["answer"] as? [String: Any] ?? [:]
    }

    /// What the simulator received by Send Consumption Information, by transaction.
    static func consumptionReceived(_ api: APIHarness) async throws -> [String: [String: Any]] {
        let listed = try await api.simulator(.GET, "/admin/consumption").json["consumption"] as? [[String: Any]] ?? []
        var found: [String: [String: Any]] = [:]
        for item in listed {
            guard let id = item["transactionId"] as? String, let body = item["body"] as? String,
                  let fields = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            else { continue }
            found[id] = fields
        }
        return found
    }
}
