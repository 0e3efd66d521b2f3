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

/// StoreKit 2 transactions (`POST …/transactions`) and App Store Server Notifications V2
/// (`POST …/notifications`) through the HTTP API, against a real PostgreSQL, signed by a test
/// certificate authority the server is told to trust (as `--trust-simulator-root` does).
@Suite struct SignedPayloadRoutesTests {
    static let app = APIHarness.app

    /// A test authority the harness's server trusts, and its signer.
    struct Signed: Sendable {
        let authority: SimulatorCertificateAuthority
        var signer: SimulatorSignedPayloads { SimulatorSignedPayloads(authority: authority) }

        func transaction(
            _ id: String, original: String? = nil, product: String, type: ProductType, at date: Date = Date(), expires: Date? = nil,
            price: Int64? = 990, currency: String = "USD", quantity: Int = 1, lineItem: String? = nil, revoked: Date? = nil,
            token: String? = nil, environment: StoreEnvironment = .sandbox, bundleId: String = SignedPayloadRoutesTests.app, signedAt: Date = Date()
        ) throws -> String {
            try signer.sign(SimulatorSignedPayloads.transaction(
                transactionId: id, originalTransactionId: original, bundleId: bundleId, productId: product, type: type, purchaseDate: date,
                expiresDate: expires, quantity: quantity, price: price, currency: currency, environment: environment,
                webOrderLineItemId: lineItem ?? (type == .autoRenewable ? "w\(id)" : nil), revocationDate: revoked,
                revocationReason: revoked == nil ? nil : 0, appAccountToken: token, signedDate: signedAt
            ))
        }

        func notification(
            _ type: String, subtype: String? = nil, uuid: String = UUID().uuidString.lowercased(), transaction: String?,
            renewalInfo: String? = nil, environment: StoreEnvironment = .sandbox, bundleId: String = SignedPayloadRoutesTests.app,
            reason: String? = nil, signedAt: Date = Date(), withoutIntermediate: Bool = false
        ) throws -> String {
            try signer.sign(SimulatorSignedPayloads.notification(
                type: type, subtype: subtype, uuid: uuid, bundleId: bundleId, environment: environment,
                signedTransactionInfo: transaction, signedRenewalInfo: renewalInfo, consumptionRequestReason: reason, signedDate: signedAt
            ), chain: withoutIntermediate ? [authority.leaf, authority.root] : nil)
        }
    }

    static func run<T: Sendable>(
        _ name: String = #function, notificationRetryDelays: [Duration] = [.milliseconds(200), .milliseconds(400), .milliseconds(800)],
        followChanges: Bool = false, _ body: @Sendable (APIHarness, Signed) async throws -> T
    ) async throws -> T {
        let authority = try SimulatorCertificateAuthority()
        return try await APIHarness.run(name, authority: authority, notificationRetryDelays: notificationRetryDelays, followChanges: followChanges) { api in
            try await body(api, Signed(authority: authority))
        }
    }

    // MARK: StoreKit 2 transactions from devices

    @Test func aSignedTransactionIsRecordedWithApplesPriceAndAnsweredLikeAReceipt() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99"])
            let bought = Date().addingTimeInterval(-60)
            // Apple's price is the whole quantity's: two for 2.58.
            let jws = try signed.transaction("2000000000000001", product: "coins.100", type: .consumable, at: bought, price: 2580, currency: "USD",
                                             quantity: 2)
            let first = try await api.postTransaction("alice", device: "phone", jws)
            #expect(first.status == 200, "\(first.text)")
            #expect(first.kinds == ["receipt", "purchase"], "\(first.text)")
            #expect(first.json["environment"] as? String == "sandbox")
            let consumables = first.entitlements["consumables"] as? [[String: Any]] ?? []
            #expect(consumables.first?["balance"] as? Int == 2, "\(first.text)")

            // The same transaction again (another signature of it, later): nothing new.
            let again = try await api.postTransaction("alice", device: "phone",
                                                      try signed.transaction("2000000000000001", product: "coins.100", type: .consumable,
                                                                             at: bought, price: 2580, currency: "USD", quantity: 2, signedAt: Date().addingTimeInterval(60)))
            #expect(again.status == 200 && again.kinds.isEmpty && again.duplicates == ["2000000000000001"], "\(again.text)")

            // Finance reads Apple's own price, not the catalog's.
            let rows = try await api.audit(user: "alice", after: first.position)
            #expect(rows.count == 1, "\(rows)")
            #expect(rows.first?["price"] as? String == "1.29" && rows.first?["amount"] as? String == "2.58", "\(rows)")
            #expect(rows.first?["priceSource"] as? String == "app_store" && rows.first?["catalogPrice"] as? String == "0.99", "\(rows)")

            // The fact holds Apple's fields verbatim, and the JWS is kept.
            let stored = try await api.client.query(
                "SELECT data -> 'fields' ->> 'price', data -> 'fields' ->> 'type' FROM ledger.events WHERE event_type = 'AppStoreTransactionObserved.v1'"
            )
            for try await (price, type) in stored.decode((String?, String?).self) {
                #expect(price == "2580" && type == "Consumable")
            }
            let kept = try await api.client.query("SELECT count(*) FROM ledger.receipts WHERE receipt_data = \(jws)")
            for try await count in kept.decode(Int.self) { #expect(count == 1) }
        }
    }

    @Test func refusedSignedTransactionsRecordNothing() async throws {
        try await Self.run { api, signed in
            let stranger = Signed(authority: try SimulatorCertificateAuthority(name: "Not the trusted one"))
            let cases: [(String, String, Int, String)] = [
                ("untrusted root", try stranger.transaction("1", product: "p", type: .nonConsumable), 422, "invalid_signed_transaction"),
                ("another app", try signed.transaction("2", product: "p", type: .nonConsumable, bundleId: "com.example.other"), 422, "invalid_signed_transaction"),
                ("not a JWS", "hello", 422, "invalid_signed_transaction"),
                ("not base64url", "a.b+c.d", 400, "invalid_request"),
            ]
            for (what, jws, status, code) in cases {
                let answer = try await api.postTransaction("alice", device: "phone", jws)
                #expect(answer.status == status && answer.errorCode == code, "\(what): \(answer.text)")
            }
            // The mutation fuzzer found it: a product id of 3,647 bytes outgrew the log's index entry (a 500).
            let long = try await api.postTransaction("alice", device: "phone",
                                                     try signed.transaction("4", product: String(repeating: "p", count: 3_000), type: .nonConsumable))
            #expect(long.status == 400 && long.errorCode == "invalid_request", "\(long.text)")
            #expect(long.errorMessage?.contains("productId of 3000 bytes") == true, "\(long.text)")
            let tampered = try signed.transaction("3", product: "p", type: .nonConsumable).split(separator: ".").enumerated()
                .map { $0.offset == 1 ? Base64URL.encode(Data(#"{"transactionId":"3","bundleId":"com.example.game","environment":"Sandbox","signedDate":\#(Date().milliseconds)}"#.utf8)) : String($0.element) }
                .joined(separator: ".")
            let answer = try await api.postTransaction("alice", device: "phone", tampered)
            #expect(answer.status == 422 && answer.errorMessage?.contains("signature") == true, "\(answer.text)")
            #expect(try await api.eventCount() == 0)
        }
    }

    // MARK: Notifications

    @Test func refusedNotificationsRecordNothing() async throws {
        try await Self.run { api, signed in
            let now = Date()
            let stranger = Signed(authority: try SimulatorCertificateAuthority(name: "Not the trusted one"))
            let expired = Signed(authority: try SimulatorCertificateAuthority(
                options: .init(leafValidity: now.addingTimeInterval(-86_400 * 30)...now.addingTimeInterval(-86_400))))
            let transaction = try signed.transaction("2000000000000009", product: "coins.100", type: .consumable)
            let cases: [(String, String, Int, String)] = [
                ("untrusted root", try stranger.notification("REFUND", transaction: transaction), 401, "invalid_signature"),
                ("broken chain (the intermediate left out)",
                 try signed.notification("REFUND", transaction: transaction, withoutIntermediate: true), 401, "invalid_signature"),
                ("leaf expired at signedDate", try expired.notification("REFUND", transaction: transaction), 401, "invalid_signature"),
                ("another bundle id", try signed.notification("REFUND", transaction: transaction, bundleId: "com.example.other"), 401, "invalid_signature"),
                ("a transaction of the other environment",
                 try signed.notification("REFUND", transaction: try signed.transaction("2000000000000009", product: "coins.100", type: .consumable,
                                                                                        environment: .production)), 401, "invalid_signature"),
            ]
            for (what, payload, status, code) in cases {
                let answer = try await api.postNotification(payload)
                #expect(answer.status == status && answer.errorCode == code, "\(what): \(answer.text)")
                #expect(answer.errorMessage?.hasSuffix("nothing was recorded") == true, "\(what): \(answer.text)")
            }
            // Its transaction naming a product id longer than any of Apple's (found by the fuzzer on the transactions route).
            let long = try await api.postNotification(try signed.notification(
                "REFUND", transaction: try signed.transaction("2000000000000010", product: String(repeating: "p", count: 3_000), type: .consumable)))
            #expect(long.status == 422 && long.errorCode == "invalid_notification", "\(long.text)")
            #expect(long.errorMessage?.contains("productId of 3000 bytes") == true, "\(long.text)")
            let xcode = try signed.signer.sign(SimulatorSignedPayloads.notification(
                type: "TEST", bundleId: Self.app, environment: .sandbox, signedTransactionInfo: nil, signedDate: now
            ).merging(["data": ["bundleId": Self.app, "environment": "Xcode"]]) { $1 })
            let local = try await api.postNotification(xcode)
            #expect(local.status == 422 && local.errorCode == "invalid_environment", "\(local.text)")
            let unknownApp = try await api.send(.POST, "/v1/apps/com.example.nobody/notifications", key: nil,
                                                json: ["signedPayload": try signed.notification("TEST", transaction: nil, bundleId: "com.example.nobody")])
            #expect(unknownApp.status == 404, "\(unknownApp.text)")
            #expect(try await api.eventCount() == 0)
            let kept = try await api.client.query("SELECT count(*) FROM ledger.receipts")
            for try await count in kept.decode(Int.self) { #expect(count == 0) }
        }
    }

    @Test func theSameNotificationTwiceRecordsOnceAndAConsumableRefundLowersTheBalance() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = Date().addingTimeInterval(-3600)
            let purchase = try signed.transaction("2000000000000010", product: "coins.100", type: .consumable, at: bought, quantity: 3,
                                                  signedAt: Date().addingTimeInterval(-60))
            let posted = try await api.postTransaction("bob", device: "phone", purchase)
            #expect(posted.status == 200, "\(posted.text)")
            let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/bob/consumptions", key: api.allKey,
                                          json: ["productId": "coins.100", "quantity": 2, "deviceId": "phone"])
            #expect(used.status == 201, "\(used.text)")

            // Apple refunds the purchase: the balance drops below what is left (overdrawn by one).
            let refunded = try signed.transaction("2000000000000010", product: "coins.100", type: .consumable, at: bought, quantity: 3,
                                                  revoked: Date(), signedAt: Date())
            let payload = try signed.notification("REFUND", uuid: "5f1e0c1a-0000-4000-8000-000000000001", transaction: refunded)
            let first = try await api.postNotification(payload)
            #expect(first.status == 200, "\(first.text)")
            #expect(first.json["outcome"] as? String == "recorded" && first.json["userId"] as? String == "bob", "\(first.text)")
            #expect(first.kinds == ["notification", "refund"], "\(first.text)")
            let second = try await api.postNotification(payload)
            #expect(second.status == 200 && second.json["outcome"] as? String == "duplicate", "\(second.text)")
            #expect(second.json["position"] as? Int == first.json["position"] as? Int)

            let balances = try await api.send(.GET, "/v1/apps/\(Self.app)/users/bob/balances?minPosition=\(first.position)", key: api.keys["read"])
            #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == -2, "\(balances.text)")
            let rows = try await api.audit(user: "bob", after: first.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "refund"], "\(rows)")
            let notifications = try await api.client.query(
                "SELECT count(*) FROM ledger.events WHERE event_type = 'AppStoreNotificationReceived.v1'")
            for try await count in notifications.decode(Int.self) { #expect(count == 1) }
        }
    }

    @Test func aConsumptionRequestIsRecordedAndWhatAppleAsksIsReadableByTheApp() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = Date().addingTimeInterval(-3600)
            // Apple's price is the whole quantity's: three coins for 2.97.
            let purchase = try signed.transaction("2000000000000040", product: "coins.100", type: .consumable, at: bought, price: 2970, quantity: 3)
            #expect(try await api.postTransaction("nina", device: "phone", purchase).status == 200)
            let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/nina/consumptions", key: api.allKey,
                                          json: ["productId": "coins.100", "quantity": 2, "deviceId": "phone"])
            #expect(used.status == 201, "\(used.text)")
            let none = try await api.send(.GET, "/v1/apps/\(Self.app)/users/nina/consumption-requests", key: api.keys["read"])
            #expect(none.status == 200 && (none.json["requests"] as? [Any])?.isEmpty == true, "\(none.text)")

            // The customer asks Apple for a refund; Apple asks the app for consumption information.
            let asked = try await api.postNotification(try signed.notification("CONSUMPTION_REQUEST", transaction: purchase, reason: "UNINTENDED_PURCHASE"))
            #expect(asked.status == 200 && asked.kinds == ["notification"], "\(asked.text)")
            let requests = try await api.send(.GET, "/v1/apps/\(Self.app)/users/nina/consumption-requests", key: api.keys["read"])
            let request = try #require((requests.json["requests"] as? [[String: Any]])?.first, "\(requests.text)")
            #expect(request["reason"] as? String == "UNINTENDED_PURCHASE" && request["transactionId"] as? String == "2000000000000040")
            #expect(request["unitsPurchased"] as? Int == 3 && request["unitsConsumed"] as? Int == 2, "\(request)")
            #expect(request["delivered"] as? Bool == true && request["refunded"] as? Bool == false && request["finished"] as? Bool == false)
            let account = request["account"] as? [String: Any]
            #expect((account?["purchased"] as? [[String: Any]])?.first?["amount"] as? String == "2.97", "2970 milliunits for the three: \(request)")
            #expect((account?["refunded"] as? [Any])?.isEmpty == true)

            // Apple refunds after all.
            let refund = try signed.transaction("2000000000000040", product: "coins.100", type: .consumable, at: bought, price: 2970, quantity: 3,
                                                revoked: Date())
            #expect(try await api.postNotification(try signed.notification("REFUND", transaction: refund)).status == 200)
            let after = try await api.send(.GET, "/v1/apps/\(Self.app)/users/nina/consumption-requests", key: api.keys["read"])
            let refunded = try #require((after.json["requests"] as? [[String: Any]])?.first)
            #expect(refunded["refunded"] as? Bool == true && refunded["unitsPurchased"] as? Int == 0, "\(refunded)")
            #expect(((refunded["account"] as? [String: Any])?["refunded"] as? [[String: Any]])?.first?["amount"] as? String == "2.97")
            let stranger = try await api.send(.GET, "/v1/apps/\(Self.app)/users/nobody/consumption-requests", key: api.keys["read"])
            #expect(stranger.status == 404, "\(stranger.text)")
        }
    }

    @Test func aRenewalByNotificationExtendsTheSubscriptionWithNoDevice() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro")
            let start = Date().addingTimeInterval(-30 * 86_400 + 60)
            let firstEnd = start.addingTimeInterval(30 * 86_400)
            let purchase = try signed.transaction("2000000000000020", product: "pro.monthly", type: .autoRenewable, at: start, expires: firstEnd,
                                                  price: 4990)
            let posted = try await api.postTransaction("carol", device: "phone", purchase)
            #expect(posted.status == 200 && posted.kinds == ["receipt", "purchase"], "\(posted.text)")

            let secondEnd = firstEnd.addingTimeInterval(30 * 86_400)
            let renewal = try signed.transaction("2000000000000021", original: "2000000000000020", product: "pro.monthly", type: .autoRenewable,
                                                 at: firstEnd, expires: secondEnd, price: 4990)
            let info = try signed.signer.sign(SimulatorSignedPayloads.renewalInfo(
                originalTransactionId: "2000000000000020", productId: "pro.monthly", environment: .sandbox, renewalDate: secondEnd, signedDate: Date()))
            let renewed = try await api.postNotification(try signed.notification("DID_RENEW", transaction: renewal, renewalInfo: info))
            #expect(renewed.status == 200 && renewed.json["userId"] as? String == "carol", "\(renewed.text)")
            #expect(renewed.kinds == ["notification", "renewal", "renewal_info"], "\(renewed.text)")

            let subscriptions = try await api.send(.GET, "/v1/apps/\(Self.app)/users/carol/entitlements?minPosition=\(renewed.position)",
                                                   key: api.keys["read"])
            let pro = (subscriptions.json["subscriptions"] as? [[String: Any]])?.first
            #expect(pro?["active"] as? Bool == true, "\(subscriptions.text)")
            #expect((pro?["expiresAt"] as? String).flatMap(LedgerJSON.parseTimestamp)?.milliseconds == secondEnd.milliseconds, "\(subscriptions.text)")
            let rows = try await api.audit(user: "carol", after: renewed.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "renewal"], "\(rows)")
            #expect(rows.allSatisfy { $0["price"] as? String == "4.99" && $0["priceSource"] as? String == "app_store" }, "\(rows)")
            // Apple alone named no device: the renewal is delivered to none.
            #expect(rows.last?["deviceId"] is NSNull, "\(rows)")
        }
    }

    @Test func aNotificationNoUserHoldsWaitsAndIsAppliedWhenItsUserPosts() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("no_ads", type: "non_consumable")
            let bought = Date().addingTimeInterval(-600)
            let refund = try signed.transaction("2000000000000030", product: "no_ads", type: .nonConsumable, at: bought,
                                                revoked: Date(), token: "0f4a8e2c-1d3b-4c5e-9a7f-2b6d8c0e1f3a")
            let early = try await api.postNotification(try signed.notification("REFUND", transaction: refund))
            #expect(early.status == 200 && early.json["outcome"] as? String == "waiting", "\(early.text)")
            #expect(early.json["userId"] is NSNull, "\(early.text)")

            // The device posts the purchase later (signed before the refund): the refund goes to its user.
            let purchase = try signed.transaction("2000000000000030", product: "no_ads", type: .nonConsumable, at: bought,
                                                  token: "0f4a8e2c-1d3b-4c5e-9a7f-2b6d8c0e1f3a", signedAt: Date().addingTimeInterval(-60))
            let posted = try await api.postTransaction("dave", device: "phone", purchase)
            #expect(posted.status == 200, "\(posted.text)")
            #expect(posted.kinds == ["receipt", "purchase", "notification", "refund"], "\(posted.text)")
            #expect((posted.entitlements["owned"] as? [Any])?.isEmpty == true, "refunded, so not owned: \(posted.text)")

            // Posting again copies nothing twice.
            let again = try await api.postTransaction("dave", device: "phone", purchase)
            #expect(again.status == 200 && again.kinds.isEmpty, "\(again.text)")

            // A notification of another purchase with dave's token: the token routes nothing until
            // the app's server binds it, and then only after the device had its chance to post.
            let another = try signed.transaction("2000000000000031", product: "no_ads", type: .nonConsumable, at: Date(),
                                                 token: "0f4a8e2c-1d3b-4c5e-9a7f-2b6d8c0e1f3a")
            let byToken = try await api.postNotification(try signed.notification("ONE_TIME_CHARGE", transaction: another))
            #expect(byToken.status == 200 && byToken.json["outcome"] as? String == "waiting", "\(byToken.text)")
            let bound = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/dave/app-account-tokens/0f4a8e2c-1d3b-4c5e-9a7f-2b6d8c0e1f3a",
                                           key: api.keys["ingest"])
            #expect(bound.status == 201, "\(bound.text)")
            let swept = try await PostgresLedger(client: api.client, logger: APIHarness.logger).waitingNotifications
                .sweep(now: Date().addingTimeInterval(11 * 60))
            #expect(swept.delivered == 1)
            let history = try await api.send(.GET, "/v1/apps/\(Self.app)/users/dave/history?limit=100", key: api.keys["read"])
            #expect((history.json["events"] as? [[String: Any]] ?? []).contains { ($0["data"] as? [String: Any])?["notificationUUID"] as? String
                == byToken.json["notificationUUID"] as? String }, "\(history.text)")
        }
    }

    // MARK: The simulator signs and notifies

    @Test func theSimulatorsSignedTransactionsAndNotificationsReachTheLedger() async throws {
        try await Self.run { api, _ in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro",
                                        simulatorOptions: ["price": "4.99", "currency": "USD"])
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + "/v1/apps/\(Self.app)/notifications"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "hank"])
            let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "hank", "bundleId": Self.app, "productId": "pro.monthly"])
            let jws = try #require(bought.json["signedTransaction"] as? String, "\(bought.text)")
            let original = try #require((bought.json["transaction"] as? [String: Any])?["transactionId"] as? String)
            let posted = try await api.postTransaction("hank", device: "phone", jws)
            #expect(posted.status == 200, "\(posted.text)")

            // The clock brings a renewal; Apple's DID_RENEW reaches the ledger with no device involved.
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            let renewed = try await api.delivered("DID_RENEW")
            #expect(renewed["attempts"] as? Int == 1, "\(renewed)")
            let answer = try #require((renewed["answer"] as? String).flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            #expect(answer["userId"] as? String == "hank" && answer["outcome"] as? String == "recorded", "\(answer)")
            let renewal = try #require(renewed["transactionId"] as? String)
            #expect(renewal != original)
            let rows = try await api.audit(user: "hank", after: answer["position"] as? Int ?? 0)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "renewal"], "\(rows)")
            #expect(rows.allSatisfy { $0["price"] as? String == "4.99" && $0["priceSource"] as? String == "app_store" }, "\(rows)")
            let subscribed = try await api.delivered("SUBSCRIBED")
            #expect(subscribed["transactionId"] as? String == original)

            // A refund by Apple support: REFUND.
            _ = try await api.simulator(.POST, "/admin/transactions/\(renewal)/cancel", ["reason": 1])
            let refunded = try await api.delivered("REFUND")
            let refundAnswer = try #require((refunded["answer"] as? String).flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            #expect((refundAnswer["recorded"] as? [[String: Any]])?.map { $0["kind"] as? String } == ["notification", "refund", "renewal_info"],
                    "the refund, and the subscription no longer renews: \(refundAnswer)")
        }
    }

    @Test func theSimulatorTriesAgainUntilTheLedgerAnswers200() async throws {
        try await Self.run(notificationRetryDelays: [.milliseconds(300), .milliseconds(600), .seconds(1), .seconds(2), .seconds(4), .seconds(8)]) { api, _ in
            try await api.defineProduct("coins.10", type: "consumable", simulatorOptions: ["price": "0.99", "currency": "USD"])
            // The ledger does not know this app yet: its notifications are refused (404) until it does.
            let late = "com.example.late"
            _ = try await api.simulator(.PUT, "/admin/apps/\(late)/products/coins.10", ["type": "consumable", "price": "0.99", "currency": "USD"])
            _ = try await api.simulator(.PUT, "/admin/apps/\(late)", ["notificationURL": api.base + "/v1/apps/\(late)/notifications"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "ivy"])
            _ = try await api.simulator(.POST, "/admin/purchases", ["userId": "ivy", "bundleId": late, "productId": "coins.10"])
            // The first try is refused (404: no such app in the ledger) before the app is registered.
            let deadline = ContinuousClock.now + .seconds(20)
            while ContinuousClock.now < deadline {
                let listed = try await api.simulator(.GET, "/admin/notifications")
                let tried = (listed.json["notifications"] as? [[String: Any]] ?? []).contains {
                    $0["bundleId"] as? String == late && ($0["attempts"] as? Int ?? 0) >= 1
                }
                if tried { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            let registry = AppRegistry(client: api.client, logger: APIHarness.logger)
            try await registry.addApp(late, sharedSecret: nil)
            let delivered = try await api.delivered("ONE_TIME_CHARGE", bundleId: late)
            #expect((delivered["attempts"] as? Int ?? 0) >= 2, "refused first, taken on a later try: \(delivered)")
            #expect(delivered["lastStatus"] as? Int == 200)
            // It waits for its user: no user of the app holds its transaction yet. The answer the
            // simulator kept is its last try's: "waiting", or "duplicate" when the try that recorded
            // it was answered after the simulator's 10 s (a loaded machine) and a later one found it.
            let answer = try #require((delivered["answer"] as? String).flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            let outcome = answer["outcome"] as? String
            #expect(outcome == "waiting" || (outcome == "duplicate" && (delivered["attempts"] as? Int ?? 0) >= 3), "\(answer) \(delivered)")
            let waiting = try await api.client.query(
                "SELECT count(*) FROM ledger.events WHERE stream_id = \("notifications/" + late)", logger: APIHarness.logger
            ).collect()
            #expect(try waiting.first?.decode(Int.self) == 1, "recorded once, waiting on notifications/\(late)")
        }
    }

    // MARK: The App Store Server API

    @Test func aRenewalOfAPurchaseTheLedgerNeverSawBringsItsHistoryFromTheAppStore() async throws {
        try await Self.run { api, _ in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro",
                                        simulatorOptions: ["price": "4.99", "currency": "USD"])
            try await api.giveServerAPIKey()
            // kim subscribed before the ledger, and renewed once: the ledger never saw the purchase.
            let bought = try await api.buy("kim", "pro.monthly")
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            let signed = try await api.signedTransactions(of: "kim")
            #expect(signed.count == 2)
            // A new device syncs the current entitlement: the renewal, whose original the ledger lacks.
            let posted = try await api.postTransaction("kim", device: "tablet", try #require(signed.last))
            #expect(posted.status == 200, "\(posted.text)")
            #expect(!posted.recorded.contains { $0["transactionId"] as? String == bought.transactionId },
                    "the post answers at once; Apple's history is fetched after it: \(posted.text)")
            // Apple's history brings the purchase, out of the post's way.
            var rows: [[String: Any]] = []
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                rows = try await api.audit(user: "kim", after: posted.position)
                if rows.count >= 2 { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            // In log order: the renewal the device posted, then the purchase Apple's history brought.
            #expect(rows.map { $0["event"] as? String } == ["renewal", "purchase"], "\(rows)")
            #expect(rows.last?["deviceId"] is NSNull, "fetched from Apple, not posted by a device: \(rows)")
            #expect(rows.allSatisfy { $0["priceSource"] as? String == "app_store" && $0["price"] as? String == "4.99" }, "\(rows)")
        }
    }

    @Test func aBackfillRecordsACustomersHistoryOnceAndLeavesAnotherUsersTransactions() async throws {
        try await Self.run { api, _ in
            try await api.defineProduct("coins.5", type: "consumable", simulatorOptions: ["price": "0.49", "currency": "USD"])
            let backfill = try api.backfill()
            // No key yet: the refusal says how to add one.
            let first = try await api.buy("lee", "coins.5")
            await #expect(throws: BackfillError.self) {
                try await backfill(app: Self.app, user: "lee", transactionId: first.transactionId, environment: nil)
            }
            try await api.giveServerAPIKey()
            _ = try await api.buy("lee", "coins.5")
            let fetched = try await backfill(app: Self.app, user: "lee", transactionId: first.transactionId, environment: nil)
            #expect(fetched.environment == .sandbox, "production did not know it; the sandbox did")
            #expect(fetched.fetched == 2 && fetched.recording.recorded.filter { $0.kind == "purchase" }.count == 2, "\(fetched.recording.recorded)")
            let again = try await backfill(app: Self.app, user: "lee", transactionId: first.transactionId, environment: .sandbox)
            #expect(again.recording.recorded.isEmpty && again.recording.duplicates.count == 2)
            // Another user of the app asking for lee's history records nothing of it.
            let other = try await backfill(app: Self.app, user: "mallory", transactionId: first.transactionId, environment: .sandbox)
            #expect(other.recording.recorded.isEmpty && other.recording.notRecorded.count == 2)
            let balances = try await api.send(.GET, "/v1/apps/\(Self.app)/users/lee/balances?minPosition=\(fetched.recording.position)", key: api.keys["read"])
            #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == 2, "\(balances.text)")
        }
    }

    @Test func aStoreKit2ViewAndAReceiptViewOfOnePurchaseGiveOnePurchaseRow() async throws {
        try await Self.run { api, signed in
            try await api.defineProduct("gems.10", type: "consumable", prices: ["USD": "1.99"])
            let bought = try await api.buy("erin", "gems.10")
            let receipt = try await api.ingest("erin", device: "phone", receipt: bought.receipt)
            #expect(receipt.status == 200 && receipt.kinds == ["receipt", "purchase"], "\(receipt.text)")
            // The same transaction as StoreKit 2 shows it: the dates the receipt gave, Apple's naming.
            let fields = try await api.recordedFields(bought.transactionId)
            let purchaseDate = Date(milliseconds: try #require(fields["purchase_date_ms"].flatMap { Int64($0) }))
            let view = try signed.transaction(bought.transactionId, original: fields["original_transaction_id"], product: "gems.10",
                                              type: .consumable, at: purchaseDate, price: 1990)
            let posted = try await api.postTransaction("erin", device: "tablet", view)
            #expect(posted.status == 200 && posted.kinds.isEmpty && posted.duplicates == [bought.transactionId], "\(posted.text)")
            let rows = try await api.audit(user: "erin", after: posted.position)
            #expect(rows.count == 1 && rows.first?["event"] as? String == "purchase", "\(rows)")
            #expect(rows.first?["transactionId"] as? String == bought.transactionId)
        }
    }
}

extension APIHarness {
    func postTransaction(_ user: String, device: String, _ jws: String) async throws -> Answer {
        try await send(.POST, "/v1/apps/\(Self.app)/transactions", key: keys["ingest"],
                       json: ["userId": user, "deviceId": device, "signedTransaction": jws])
    }

    func postNotification(_ payload: String) async throws -> Answer {
        try await send(.POST, "/v1/apps/\(Self.app)/notifications", key: nil, json: ["signedPayload": payload])
    }

    /// The simulator's latest delivered notification of `type` (waits up to 20 s for it).
    func delivered(_ type: String, bundleId: String = APIHarness.app) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            let listed = try await simulator(.GET, "/admin/notifications")
            if let found = (listed.json["notifications"] as? [[String: Any]] ?? []).last(where: {
                $0["notificationType"] as? String == type && $0["bundleId"] as? String == bundleId && $0["delivered"] as? Bool == true
            }) { return found }
            try await Task.sleep(for: .milliseconds(50))
        }
        throw HarnessError(message: "no \(type) notification of \(bundleId) was delivered within 20 s: \(try await simulator(.GET, "/admin/notifications").text)")
    }

    /// An App Store Server API key made in the simulator, given to the app in the ledger.
    func giveServerAPIKey() async throws {
        let made = try await simulator(.POST, "/admin/apps/\(Self.app)/api-keys")
        guard let keyID = made.json["keyId"] as? String, let issuerID = made.json["issuerId"] as? String,
              let pem = made.json["privateKey"] as? String
        else { throw HarnessError(message: "the simulator made no API key: \(made.text)") }
        if productionSimulatorBase != nil {
            // Apple's keys are the team's, good in both environments.
            let taken = try await productionSimulator(.POST, "/admin/apps/\(Self.app)/api-keys", ["keyId": keyID, "issuerId": issuerID, "privateKey": pem])
            guard taken.status == 201 else { throw HarnessError(message: "the production simulator did not take the key: \(taken.text)") }
        }
        try await AppRegistry(client: client, logger: Self.logger, secrets: secrets)
            .setServerAPIKey(.init(keyID: keyID, issuerID: issuerID, privateKeyPEM: pem), of: Self.app)
    }

    /// The user's transactions as StoreKit 2 signs them now (`Transaction.all`), from the simulator.
    func signedTransactions(of user: String) async throws -> [String] {
        let listed = try await simulator(.GET, "/admin/users/\(user)/apps/\(Self.app)")
        return listed.json["signedTransactions"] as? [String] ?? []
    }

    /// The backfill use case in this process, as `ledger appstore backfill` makes it.
    func backfill() throws -> BackfillHistory {
        let ledger = PostgresLedger(client: client, secrets: secrets, logger: Self.logger)
        return BackfillHistory(handler: ledger.handler, archive: ledger.archive, inbox: ledger.inbox, directory: ledger.registry,
                               source: serverAPI(), logger: Self.logger)
    }

    /// The App Store Server API client of the `ledger appstore` commands, at the simulators
    /// (`productionURL` elsewhere, for an Apple that does not answer).
    func serverAPI(productionURL: String? = nil, sandboxURL: String? = nil, timeout: Duration = .seconds(30)) -> AppStoreServerAPI {
        let verifier = SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, authority!.root])
        return AppStoreServerAPI(configuration: .init(productionURL: productionURL ?? ((productionSimulatorBase ?? simulatorBase) + "/production"),
                                                      sandboxURL: sandboxURL ?? (simulatorBase + "/sandbox"), timeout: timeout),
                                 verifier: verifier)
    }

    /// The ledger over this database as the `ledger appstore` commands and the leading server
    /// build it: with the App Store Server API at the simulators.
    func appStoreLedger(productionURL: String? = nil, sandboxURL: String? = nil, timeout: Duration = .seconds(30)) -> PostgresLedger {
        PostgresLedger(client: client, secrets: secrets, history: serverAPI(productionURL: productionURL, sandboxURL: sandboxURL, timeout: timeout),
                       logger: Self.logger)
    }

    func eventCount() async throws -> Int {
        // The log's purchases and notifications; key revocations (`keys/…` streams) are not the tests' subject.
        for try await count in try await client.query("SELECT count(*)::int FROM ledger.events WHERE stream_id NOT LIKE 'keys/%'").decode(Int.self) {
            return count
        }
        return 0
    }

    /// The latest fields recorded for a transaction.
    func recordedFields(_ transactionId: String) async throws -> [String: String] {
        let rows = try await client.query("""
            SELECT (data -> 'fields')::text FROM ledger.events
            WHERE event_type = 'AppStoreTransactionObserved.v1' AND data ->> 'transactionId' = \(transactionId)
            ORDER BY "position" DESC LIMIT 1
            """)
        for try await text in rows.decode(String.self) { return try JSONDecoder().decode([String: String].self, from: Data(text.utf8)) }
        return [:]
    }
}
