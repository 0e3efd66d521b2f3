import AppStoreSimulator
import Foundation
import LedgerDomain
import LedgerStore
import NIOCore
import NIOHTTP1
import PostgresNIO
import Testing

/// Payloads in the shapes Apple documents them (the fields of Apple's own server library's test
/// resources and of its documentation pages), signed by a chain shaped like Apple's, through the
/// HTTP API: the money finance reads, and that every payload Apple signs for the app is recorded.
@Suite struct AppleShapesTests {
    static let app = APIHarness.app

    /// A `JWSTransactionDecodedPayload` as Apple's documentation and library fixture give one
    /// (every field Apple names, Advanced Commerce and commitment left out unless given), for this app.
    static func transaction(
        _ id: String, original: String? = nil, product: String, type: String, purchased: Date, originalPurchase: Date? = nil,
        expires: Date? = nil, quantity: Int = 1, price: Int64, currency: String = "USD", storefront: String = "USA",
        storefrontId: String = "143441", reason: String = "PURCHASE", group: String? = nil, extra: [String: Any] = [:]
    ) -> [String: Any] {
        var fields: [String: Any] = [
            "transactionId": id, "originalTransactionId": original ?? id, "bundleId": app, "productId": product,
            "purchaseDate": purchased.milliseconds, "originalPurchaseDate": (originalPurchase ?? purchased).milliseconds,
            "quantity": quantity, "type": type, "inAppOwnershipType": "PURCHASED", "signedDate": Date().milliseconds,
            "environment": "Sandbox", "transactionReason": reason, "storefront": storefront, "storefrontId": storefrontId,
            "price": price, "currency": currency, "appTransactionId": "704289572311", "appAccountToken": "7e3fb20b-4cdb-47cc-936d-99d65f608138",
        ]
        if let expires { fields["expiresDate"] = expires.milliseconds; fields["webOrderLineItemId"] = "w\(id)" }
        if let group { fields["subscriptionGroupIdentifier"] = group }
        return fields.merging(extra) { $1 }
    }

    /// The same transaction refunded, as Apple signs it for a REFUND notification.
    static func refunded(_ fields: [String: Any], at date: Date, type: String, percentage: Int? = nil, reason: Int = 0) -> [String: Any] {
        var refunded = fields
        refunded["revocationDate"] = date.milliseconds
        refunded["revocationReason"] = reason
        refunded["revocationType"] = type
        if let percentage { refunded["revocationPercentage"] = percentage }
        refunded["signedDate"] = Date().milliseconds
        return refunded
    }

    /// A `responseBodyV2DecodedPayload` of type `type` with `data` about the app and `transaction`.
    static func notification(_ type: String, subtype: String? = nil, transaction: String?, extra: [String: Any] = [:]) -> [String: Any] {
        var data: [String: Any] = ["appAppleId": 1_234_567_890, "bundleId": app, "bundleVersion": "42", "environment": "Sandbox", "status": 1]
        if let transaction { data["signedTransactionInfo"] = transaction }
        var payload: [String: Any] = [
            "notificationType": type, "notificationUUID": UUID().uuidString.lowercased(), "version": "2.0",
            "signedDate": Date().milliseconds, "data": data.merging(extra) { $1 },
        ]
        if let subtype { payload["subtype"] = subtype }
        return payload
    }

    static func date(_ text: String) -> Date { LedgerJSON.parseTimestamp(text)! }

    // MARK: 1. Apple's price is the whole quantity's

    @Test func aMultiUnitPurchaseIsBookedAtApplesTotalNotTimesItsQuantity() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99"])
            let jws = try signed.signer.sign(Self.transaction("2000000000300001", product: "coins.100", type: "Consumable",
                                                              purchased: Date().addingTimeInterval(-120), quantity: 3, price: 2970))
            let posted = try await api.postTransaction("amy", device: "phone", jws)
            #expect(posted.status == 200 && posted.kinds == ["receipt", "purchase"], "\(posted.text)")
            #expect((posted.entitlements["consumables"] as? [[String: Any]])?.first?["balance"] as? Int == 3, "\(posted.text)")
            let rows = try await api.audit(user: "amy", after: posted.position)
            #expect(rows.count == 1, "\(rows)")
            #expect(rows.first?["amount"] as? String == "2.97", "gross is Apple's price, the total of the three: \(rows)")
            #expect(rows.first?["price"] as? String == "0.99" && rows.first?["quantity"] as? Int == 3, "\(rows)")
            #expect(rows.first?["priceSource"] as? String == "app_store", "\(rows)")
            let summary = try await api.summary(user: "amy", after: posted.position)
            #expect(summary.first?["gross"] as? String == "2.97", "\(summary)")

            // The simulator's StoreKit 2 view of a multi-unit purchase says the same.
            try await api.defineProduct("gems.5", type: "consumable", prices: ["USD": "1.99"], simulatorOptions: ["price": "1.99", "currency": "USD"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "amy"])
            let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "amy", "bundleId": Self.app, "productId": "gems.5", "quantity": 4])
            let simulated = try await api.postTransaction("amy", device: "phone", try #require(bought.json["signedTransaction"] as? String))
            let gems = try await api.audit(user: "amy", after: simulated.position).filter { $0["productId"] as? String == "gems.5" }
            #expect(gems.first?["amount"] as? String == "7.96" && gems.first?["price"] as? String == "1.99", "\(gems)")
        }
    }

    // MARK: 2. Prorated refunds

    @Test func aProratedRefundGivesBackItsShareOfTheMoney() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "9.99"])
            let bought = Date().addingTimeInterval(-86_400 * 10)
            let fields = Self.transaction("2000000000300101", product: "pro.monthly", type: "Auto-Renewable Subscription", purchased: bought,
                                          expires: bought.addingTimeInterval(86_400 * 30), price: 9990, group: "21432743")
            let posted = try await api.postTransaction("ben", device: "phone", try signed.signer.sign(fields))
            #expect(posted.status == 200, "\(posted.text)")
            let refundedAt = Date().addingTimeInterval(-60)
            let refund = try signed.signer.sign(Self.notification("REFUND", transaction: try signed.signer.sign(
                Self.refunded(fields, at: refundedAt, type: "REFUND_PRORATED", percentage: 40000)
            )))
            let answer = try await api.postNotification(refund)
            #expect(answer.status == 200 && answer.json["outcome"] as? String == "recorded", "\(answer.text)")
            let rows = try await api.audit(user: "ben", after: answer.json["position"] as? Int ?? 0)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "refund"], "\(rows)")
            let refundRow = try #require(rows.last)
            #expect(refundRow["amount"] as? String == "4", "40 % of 9.99 is 3.996, 4.00 in cents: \(refundRow)")
            #expect(refundRow["refund"] as? String == "prorated" && refundRow["refundShare"] as? Int == 40000, "\(refundRow)")
            let summary = try await api.summary(user: "ben", after: answer.json["position"] as? Int ?? 0)
            #expect(summary.first?["refundedAmount"] as? String == "4" && summary.first?["net"] as? String == "5.99", "\(summary)")

            // The purchase's view again (signed before the refund) leaves the refund as Apple last described it.
            let again = try await api.postTransaction("ben", device: "tablet", try signed.signer.sign(fields))
            let after = try await api.audit(user: "ben", after: again.position)
            #expect(after.last?["amount"] as? String == "4", "an older signed view leaves the refund as Apple last described it: \(after)")
        }
    }

    @Test func aProratedRefundOfAConsumableTakesBackItsShareOfTheUnits() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99"])
            let fields = Self.transaction("2000000000300201", product: "coins.100", type: "Consumable",
                                          purchased: Date().addingTimeInterval(-3_600), quantity: 3, price: 2970)
            #expect(try await api.postTransaction("cat", device: "phone", try signed.signer.sign(fields)).status == 200)
            let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/cat/consumptions", key: api.keys["ingest"],
                                          json: ["productId": "coins.100", "quantity": 2, "deviceId": "phone"])
            #expect(used.json["balance"] as? Int == 1, "\(used.text)")
            // One of the three refunded: Apple's percentage is of the whole quantity.
            let refund = try signed.signer.sign(Self.notification("REFUND", transaction: try signed.signer.sign(
                Self.refunded(fields, at: Date().addingTimeInterval(-60), type: "REFUND_PRORATED", percentage: 33333)
            )))
            let answer = try await api.postNotification(refund)
            #expect(answer.status == 200, "\(answer.text)")
            let position = answer.json["position"] as? Int ?? 0
            let balances = try await api.send(.GET, "/v1/apps/\(Self.app)/users/cat/balances?minPosition=\(position)", key: api.keys["read"])
            #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == 0, "3 bought, 2 used, 1 refunded: \(balances.text)")
            let rows = try await api.audit(user: "cat", after: position)
            #expect(rows.last?["event"] as? String == "refund" && rows.last?["quantity"] as? Int == 1, "\(rows)")
            #expect(rows.last?["amount"] as? String == "0.99", "33.333 % of 2.97: \(rows)")
        }
    }

    @Test func theSimulatorsProratedAndFullRefundsReachTheAuditTrail() async throws {
        try await SignedPayloadRoutesTests.run { api, _ in
            try await api.defineProduct("coins.10", type: "consumable", prices: ["USD": "0.99"], simulatorOptions: ["price": "0.99", "currency": "USD"])
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + "/v1/apps/\(Self.app)/notifications"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "dan"])
            let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "dan", "bundleId": Self.app, "productId": "coins.10", "quantity": 4])
            let posted = try await api.postTransaction("dan", device: "phone", try #require(bought.json["signedTransaction"] as? String))
            let id = try #require((bought.json["transaction"] as? [String: Any])?["transactionId"] as? String)
            #expect(posted.status == 200)
            _ = try await api.simulator(.POST, "/admin/transactions/\(id)/cancel", ["reason": 1, "percentage": 50000])
            let delivered = try await api.delivered("REFUND")
            let answer = try #require((delivered["answer"] as? String).flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] })
            let rows = try await api.audit(user: "dan", after: answer["position"] as? Int ?? 0)
            #expect(rows.last?["refund"] as? String == "prorated" && rows.last?["quantity"] as? Int == 2 && rows.last?["amount"] as? String == "1.98",
                    "half of four coins at 0.99: \(rows)")
            // verifyReceipt's view of the refund names no share: the refund stays as the signed view described it.
            let receipt = try await api.ingest("dan", device: "phone", receipt: try await api.freshReceipt("dan"))
            #expect(receipt.status == 200, "\(receipt.text)")
            let after = try await api.audit(user: "dan", after: receipt.position)
            #expect(after.last?["refund"] as? String == "prorated" && after.last?["amount"] as? String == "1.98", "\(after)")
            let balances = try await api.send(.GET, "/v1/apps/\(Self.app)/users/dan/balances?minPosition=\(receipt.position)", key: api.keys["read"])
            #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == 2, "\(balances.text)")
        }
    }

    @Test func aFamilyRevocationMovesNoMoneyAndAFullRefundAllOfIt() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("level.pack", type: "non_consumable", prices: ["USD": "4.99"])
            var fields = Self.transaction("2000000000300301", product: "level.pack", type: "Non-Consumable",
                                          purchased: Date().addingTimeInterval(-3_600), price: 4990)
            fields["inAppOwnershipType"] = "FAMILY_SHARED"
            #expect(try await api.postTransaction("eve", device: "phone", try signed.signer.sign(fields)).status == 200)
            let revoke = try signed.signer.sign(Self.notification("REVOKE", transaction: try signed.signer.sign(
                Self.refunded(fields, at: Date().addingTimeInterval(-60), type: "FAMILY_REVOKE")
            )))
            let answer = try await api.postNotification(revoke)
            #expect(answer.status == 200, "\(answer.text)")
            #expect(answer.recorded.contains { $0["kind"] as? String == "refund" }, "\(answer.text)")
            // A family member paid nothing: no finance row before, none after, and no longer owned.
            let position = answer.json["position"] as? Int ?? 0
            #expect(try await api.audit(user: "eve", after: position).isEmpty)
            let read = try await api.send(.GET, "/v1/apps/\(Self.app)/users/eve/entitlements?minPosition=\(position)", key: api.keys["read"])
            #expect((read.json["owned"] as? [Any])?.isEmpty == true, "\(read.text)")
            // The purchaser's own refund, by contrast, gives the money back.
            let own = Self.transaction("2000000000300302", product: "level.pack", type: "Non-Consumable", purchased: Date().addingTimeInterval(-3_600), price: 4990)
            #expect(try await api.postTransaction("eve", device: "phone", try signed.signer.sign(own)).status == 200)
            let refunded = try await api.postNotification(try signed.signer.sign(Self.notification("REFUND", transaction: try signed.signer.sign(
                Self.refunded(own, at: Date().addingTimeInterval(-30), type: "REFUND_FULL", reason: 1)
            ))))
            let rows = try await api.audit(user: "eve", after: refunded.json["position"] as? Int ?? 0)
            #expect(rows.map { "\($0["event"] ?? "")/\($0["refund"] ?? "")/\($0["amount"] ?? "")" } == ["purchase/<null>/4.99", "refund/full/4.99"], "\(rows)")
        }
    }

    // MARK: 3. Notifications about no transaction

    @Test func externalPurchaseTokenAndRescindConsentNotificationsAreRecorded() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            // Apple's fixture shapes: no environment in the token (a SANDBOX id is the sandbox's).
            let token: [String: Any] = [
                "notificationType": "EXTERNAL_PURCHASE_TOKEN", "subtype": "UNREPORTED", "notificationUUID": UUID().uuidString.lowercased(),
                "version": "2.0", "signedDate": Date().milliseconds,
                "externalPurchaseToken": ["externalPurchaseId": "SANDBOX_b2158121-7af9-49d4-9561-1f588205523e",
                                          "tokenCreationDate": Date().milliseconds, "appAppleId": 55555, "bundleId": Self.app],
            ]
            let first = try await api.postNotification(try signed.signer.sign(token))
            #expect(first.status == 200 && first.json["outcome"] as? String == "recorded" && first.json["environment"] as? String == "sandbox",
                    "\(first.text)")
            let again = try await api.postNotification(try signed.signer.sign(token))
            #expect(again.status == 200 && again.json["outcome"] as? String == "duplicate", "Apple's retry records nothing: \(again.text)")

            var production = token
            production["notificationUUID"] = UUID().uuidString.lowercased()
            production["subtype"] = "CREATED"
            production["externalPurchaseToken"] = ["externalPurchaseId": "b2158121-7af9-49d4-9561-1f588205523f", "tokenCreationDate": Date().milliseconds,
                                                   "appAppleId": 55555, "bundleId": Self.app, "tokenType": "ACQUISITION"]
            let live = try await api.postNotification(try signed.signer.sign(production))
            #expect(live.status == 200 && live.json["environment"] as? String == "production", "\(live.text)")

            let appTransaction = try signed.signer.sign([
                "receiptType": "Sandbox", "appAppleId": 41234, "bundleId": Self.app, "applicationVersion": "1",
                "receiptCreationDate": Date().milliseconds, "originalPurchaseDate": Date().milliseconds, "originalApplicationVersion": "1",
                "appTransactionId": "71134", "originalPlatform": "iOS",
            ])
            let rescind: [String: Any] = [
                "notificationType": "RESCIND_CONSENT", "notificationUUID": UUID().uuidString.lowercased(), "version": "2.0",
                "signedDate": Date().milliseconds,
                "appData": ["appAppleId": 41234, "bundleId": Self.app, "environment": "Sandbox", "signedAppTransactionInfo": appTransaction],
            ]
            let rescinded = try await api.postNotification(try signed.signer.sign(rescind))
            #expect(rescinded.status == 200 && rescinded.json["outcome"] as? String == "recorded", "\(rescinded.text)")
            // A mass renewal extension's summary: about no one transaction either.
            let summary: [String: Any] = [
                "notificationType": "RENEWAL_EXTENSION", "subtype": "SUMMARY", "notificationUUID": UUID().uuidString.lowercased(),
                "version": "2.0", "signedDate": Date().milliseconds,
                "summary": ["environment": "Sandbox", "appAppleId": 41234, "bundleId": Self.app, "productId": "pro.monthly",
                            "requestIdentifier": "efb27071-45a4-4aca-9854-2a1e9146f265", "storefrontCountryCodes": ["CAN", "USA", "MEX"],
                            "succeededCount": 5, "failedCount": 2],
            ]
            let summarized = try await api.postNotification(try signed.signer.sign(summary))
            #expect(summarized.status == 200 && summarized.json["outcome"] as? String == "recorded", "\(summarized.text)")

            // All three are in the log, with Apple's fields as they came.
            let kept = try await api.client.query("""
                SELECT data ->> 'notificationType', data -> 'fields' ->> 'externalPurchaseToken.externalPurchaseId',
                       data -> 'fields' ->> 'appData.signedAppTransactionInfo'
                FROM ledger.events WHERE event_type LIKE 'AppStoreNotificationReceived%' ORDER BY "position"
                """)
            var types: [String] = []
            for try await (type, tokenId, app) in kept.decode((String, String?, String?).self) {
                types.append(type)
                if type == "RESCIND_CONSENT" { #expect(app == appTransaction) }
                if type == "EXTERNAL_PURCHASE_TOKEN" { #expect(tokenId?.isEmpty == false) }
            }
            #expect(types == ["EXTERNAL_PURCHASE_TOKEN", "EXTERNAL_PURCHASE_TOKEN", "RESCIND_CONSENT", "RENEWAL_EXTENSION"], "\(types)")

            // Another app's are still refused: the app in the payload is the one of the URL.
            var other = token
            other["notificationUUID"] = UUID().uuidString.lowercased()
            other["externalPurchaseToken"] = ["externalPurchaseId": "SANDBOX_1", "appAppleId": 1, "bundleId": "com.example.other"]
            let refused = try await api.postNotification(try signed.signer.sign(other))
            #expect(refused.status == 401 && refused.errorCode == "invalid_signature", "\(refused.text)")
        }
    }

    @Test func theSimulatorSendsTheNotificationsAboutTheApp() async throws {
        try await SignedPayloadRoutesTests.run { api, _ in
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + "/v1/apps/\(Self.app)/notifications"])
            for type in ["EXTERNAL_PURCHASE_TOKEN", "RESCIND_CONSENT", "TEST"] {
                let sent = try await api.simulator(.POST, "/admin/apps/\(Self.app)/notifications", ["type": type])
                #expect(sent.status == 202, "\(sent.text)")
                let delivered = try await api.delivered(type)
                #expect(delivered["lastStatus"] as? Int == 200 && delivered["attempts"] as? Int == 1, "\(delivered)")
            }
        }
    }

    // MARK: 4. Advanced Commerce

    @Test func advancedCommerceFieldsAreKeptAsTheyCameAndAnsweredAtOnce() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("com.example.sku.premium", type: "auto_renewable", duration: "P1M", group: "premium", prices: ["USD": "10.99"])
            let bought = Date().addingTimeInterval(-3_600)
            // Apple's library fixture: items is a list of objects, each with a list of refunds.
            let info: [String: Any] = [
                "descriptors": ["description": "Premium Plan", "displayName": "Premium"],
                "estimatedTax": 1500,
                "items": [[
                    "SKU": "com.example.sku.premium", "description": "Premium feature", "displayName": "Premium Feature", "price": 9990,
                    "refunds": [["refundAmount": 5000, "refundDate": 1_698_149_100_000, "refundReason": "FULFILLMENT_ISSUE", "refundType": "PRORATED"]],
                    "revocationDate": 1_698_149_200_000,
                ] as [String: Any]],
                "period": "P1M", "requestReferenceId": "ref-12345", "taxCode": "TAX_CODE_1", "taxExclusivePrice": 8490, "taxRate": "0.15",
            ]
            let fields = Self.transaction("2000000000300401", product: "com.example.sku.premium", type: "Auto-Renewable Subscription",
                                          purchased: bought, expires: bought.addingTimeInterval(86_400 * 30), price: 10990,
                                          extra: ["advancedCommerceInfo": info, "billingPlanType": "MONTHLY",
                                                  "commitmentInfo": ["billingPeriodNumber": 3, "commitmentExpiresDate": 1_698_150_000_000,
                                                                     "commitmentPrice": 119_880, "totalBillingPeriods": 12],
                                                  "eligibleWinBackOfferIds": ["a,b", "c"]])
            let started = ContinuousClock.now
            let posted = try await AppleShapesTests.postTransaction(api, "fay", try signed.signer.sign(fields))
            #expect(posted.status == 200, "\(posted.text)")
            #expect(ContinuousClock.now - started < .seconds(10), "answered, not hung")
            let recorded = try await api.recordedFields("2000000000300401")
            let items = try #require(recorded["advancedCommerceInfo.items"])
            let parsed = try #require(try JSONSerialization.jsonObject(with: Data(items.utf8)) as? [[String: Any]])
            #expect(parsed.first?["SKU"] as? String == "com.example.sku.premium", "\(items)")
            #expect((parsed.first?["refunds"] as? [[String: Any]])?.first?["refundAmount"] as? Int == 5000, "\(items)")
            #expect(recorded["advancedCommerceInfo.descriptors.displayName"] == "Premium" && recorded["advancedCommerceInfo.taxRate"] == "0.15")
            #expect(recorded["commitmentInfo.totalBillingPeriods"] == "12", "\(recorded)")
            #expect(recorded["eligibleWinBackOfferIds"] == #"["a,b","c"]"#, "a list whose strings hold commas is kept as JSON: \(recorded)")

            // Through the keyless webhook, in a DID_RENEW, the same.
            var renewal = Self.transaction("2000000000300402", original: "2000000000300401", product: "com.example.sku.premium",
                                           type: "Auto-Renewable Subscription", purchased: bought.addingTimeInterval(60),
                                           expires: bought.addingTimeInterval(86_400 * 31), price: 10990, reason: "RENEWAL")
            renewal["advancedCommerceInfo"] = info
            let notified = try await api.postNotification(try signed.signer.sign(Self.notification("DID_RENEW", transaction: try signed.signer.sign(renewal))))
            #expect(notified.status == 200 && notified.json["userId"] as? String == "fay", "\(notified.text)")

            // Nesting far deeper than Apple's is kept as JSON below the bound, answered at once.
            var deep: Any = ["leaf": 1]
            for _ in 0..<300 { deep = [deep] }
            let nested = Self.transaction("2000000000300403", product: "com.example.sku.premium", type: "Auto-Renewable Subscription",
                                          purchased: bought.addingTimeInterval(120), expires: bought.addingTimeInterval(86_400 * 32),
                                          price: 10990, extra: ["advancedCommerceInfo": ["items": deep, "a": ["b": ["c": ["d": ["e": ["f": ["g": ["h": ["i": ["j": 1]]]]]]]]]]])
            let deepStart = ContinuousClock.now
            let deepPosted = try await AppleShapesTests.postTransaction(api, "fay", try signed.signer.sign(nested))
            #expect(deepPosted.status == 200, "\(deepPosted.text)")
            #expect(ContinuousClock.now - deepStart < .seconds(10))
            let deepFields = try await api.recordedFields("2000000000300403")
            #expect(deepFields.keys.contains { $0.hasPrefix("advancedCommerceInfo.a.b.c.d.e.f.g.") && $0.split(separator: ".").count <= 10 }, "\(deepFields.keys.sorted())")
        }
    }

    @Test func theSimulatorsAdvancedCommerceProductsReachTheLedger() async throws {
        try await SignedPayloadRoutesTests.run { api, _ in
            try await api.defineProduct("ac.pack", type: "consumable", prices: ["USD": "2.99"],
                                        simulatorOptions: ["price": "2.99", "currency": "USD", "advancedCommerce": true])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "gus"])
            let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "gus", "bundleId": Self.app, "productId": "ac.pack", "quantity": 2])
            let posted = try await AppleShapesTests.postTransaction(api, "gus", try #require(bought.json["signedTransaction"] as? String))
            #expect(posted.status == 200, "\(posted.text)")
            let id = try #require((bought.json["transaction"] as? [String: Any])?["transactionId"] as? String)
            let items = try #require(try await api.recordedFields(id)["advancedCommerceInfo.items"])
            #expect(items.hasPrefix("[{") && items.contains("\"SKU\":\"ac.pack.sku\""), "\(items)")
        }
    }

    /// A post with a deadline of its own, so a hang fails the test instead of holding the suite.
    static func postTransaction(_ api: APIHarness, _ user: String, _ jws: String) async throws -> APIHarness.Answer {
        try await APIHarness.send(.POST, api.base + "/v1/apps/\(app)/transactions", key: api.keys["ingest"],
                                  json: ["userId": user, "deviceId": "phone", "signedTransaction": jws], timeout: .seconds(20))
    }

    // MARK: 5. The buyer's country

    @Test func theStorefrontReachesRowsTheCSVAndTheSummary() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99", "EUR": "1.09"])
            let us = try await api.postTransaction("hal", device: "phone", try signed.signer.sign(
                Self.transaction("2000000000300501", product: "coins.100", type: "Consumable", purchased: Date().addingTimeInterval(-600), price: 990)))
            #expect(us.status == 200)
            let fr = try await api.postTransaction("ida", device: "phone", try signed.signer.sign(
                Self.transaction("2000000000300502", product: "coins.100", type: "Consumable", purchased: Date().addingTimeInterval(-500),
                                 price: 1090, currency: "EUR", storefront: "FRA", storefrontId: "143442")))
            #expect(fr.status == 200)
            // A verifyReceipt receipt names no storefront.
            let bought = try await api.buy("joe", "coins.100")
            let receipt = try await api.ingest("joe", device: "phone", receipt: bought.receipt, price: "0.99", currency: "USD")
            let rows = try await api.audit(user: nil, after: receipt.position)
            let byUser = Dictionary(rows.map { ($0["userId"] as? String ?? "", $0) }) { $1 }
            #expect(byUser["hal"]?["storefront"] as? String == "USA" && byUser["ida"]?["storefront"] as? String == "FRA", "\(rows)")
            #expect(byUser["joe"]?["storefront"] is NSNull, "unknown, and said so: \(rows)")

            let csv = try await api.send(.GET, "/v1/audit/events?environment=sandbox&minPosition=\(receipt.position)", key: api.keys["finance"],
                                         headers: [("Accept", "text/csv")])
            let lines = csv.text.split(separator: "\r\n").map(String.init)
            let header = lines.first?.split(separator: ",").map(String.init) ?? []
            let column = try #require(header.firstIndex(of: "storefront"), "\(header)")
            let values = lines.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init)[column] }
            #expect(Set(values) == ["USA", "FRA", ""], "\(csv.text)")

            let summary = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&groupBy=storefront,currency&minPosition=\(receipt.position)",
                                             key: api.keys["finance"])
            let groups = (summary.json["rows"] as? [[String: Any]] ?? []).map { "\($0["storefront"] ?? "-")/\($0["currency"] ?? "-")/\($0["gross"] ?? "-")" }
            #expect(Set(groups) == ["USA/USD/0.99", "FRA/EUR/1.09", "<null>/USD/0.99"], "\(summary.text)")
        }
    }

    // MARK: 6. The currency in force when it happened

    @Test func aUserWhoMovesCountryKeepsLastYearsRenewalsInLastYearsCurrency() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "9.99", "EUR": "10.99"])
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99", "EUR": "1.09"])
            let bought = try await api.buy("kai", "pro.monthly")
            #expect(try await api.ingest("kai", device: "phone", receipt: bought.receipt, price: "9.99", currency: "USD").status == 200)
            // A renewal, seen by a post that says no price: the catalog's, in dollars.
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            #expect(try await api.ingest("kai", device: "phone", receipt: try await api.freshReceipt("kai")).status == 200)
            // Kai moves to France and buys coins there: the device says EUR.
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 1])
            let coins = try await api.buy("kai", "coins.100")
            #expect(try await api.ingest("kai", device: "phone", receipt: coins.receipt, price: "1.09", currency: "EUR").status == 200)
            // The next renewal, in France.
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 4])
            let last = try await api.ingest("kai", device: "phone", receipt: try await api.freshReceipt("kai"))
            let rows = try await api.audit(user: "kai", after: last.position).filter { $0["productId"] as? String == "pro.monthly" }
            #expect(rows.map { "\($0["event"] ?? "")" } == ["purchase", "renewal", "renewal"], "\(rows)")
            #expect(rows.map { "\($0["currency"] ?? "")/\($0["price"] ?? "")" } == ["USD/9.99", "USD/9.99", "EUR/10.99"],
                    "the renewal before the move stays in dollars: \(rows)")
        }
    }

    // MARK: 7. A restore of a purchase the ledger never saw

    @Test func aRestoreOfAnUnseenPurchaseIsOwnedSinceTheOriginalPurchase() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("level.pack", type: "non_consumable", prices: ["USD": "4.99"])
            let original = Self.date("2025-03-14T09:26:53.000Z")
            let restored = Date().addingTimeInterval(-60)
            let restore = Self.transaction("2000000000300702", original: "2000000000300701", product: "level.pack", type: "Non-Consumable",
                                           purchased: restored, originalPurchase: original, price: 4990)
            let posted = try await api.postTransaction("lea", device: "tablet", try signed.signer.sign(restore))
            #expect(posted.status == 200 && posted.kinds.contains("restore"), "\(posted.text)")
            let owned = try #require((posted.entitlements["owned"] as? [[String: Any]])?.first)
            #expect(owned["ownedSince"] as? String == "2025-03-14T09:26:53.000Z", "\(owned)")
            let read = try await api.send(.GET, "/v1/apps/\(Self.app)/users/lea/entitlements?minPosition=\(posted.position)", key: api.keys["read"])
            #expect(((read.json["owned"] as? [[String: Any]])?.first?["ownedSince"] as? String) == "2025-03-14T09:26:53.000Z", "\(read.text)")
        }
    }

    // MARK: 8. A duplicate's position

    @Test func aRepostAnswersWhereTheLogHoldsWhatItRepeatsSequentiallyAndConcurrently() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("level.pack", type: "non_consumable")
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("max", "level.pack")
            let first = try await api.ingest("max", device: "phone", receipt: bought.receipt)
            #expect(first.kinds.contains("purchase"), "\(first.text)")
            _ = try await api.simulator(.POST, "/admin/transactions/\(bought.transactionId)/cancel", ["reason": 0])
            let refunded = try await api.ingest("max", device: "phone", receipt: try await api.freshReceipt("max"))
            let refundPosition = try #require(refunded.recorded.first { $0["kind"] as? String == "refund" }?["position"] as? Int, "\(refunded.text)")
            // Something else for the same user afterwards.
            let coins = try await api.buy("max", "coins.100")
            #expect(try await api.ingest("max", device: "phone", receipt: coins.receipt).position > refundPosition)

            // The first receipt again, sequentially: where the log holds its transaction now.
            for _ in 0..<2 {
                let again = try await api.ingest("max", device: "phone", receipt: bought.receipt)
                #expect(again.kinds.isEmpty && again.position == refundPosition, "\(again.text)")
                #expect((again.entitlements["owned"] as? [Any])?.isEmpty == true, "\(again.text)")
            }
            // And three at once answer the same.
            let answers = try await withThrowingTaskGroup(of: APIHarness.Answer.self) { group in
                for _ in 0..<3 { group.addTask { try await api.ingest("max", device: "phone", receipt: bought.receipt) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.map(\.position) == [refundPosition, refundPosition, refundPosition], "\(answers.map(\.text))")
            // A read at that position agrees with the answer: nothing owned.
            let read = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/max/entitlements?minPosition=\(refundPosition)", key: api.keys["read"])
            #expect((read.json["owned"] as? [Any])?.isEmpty == true, "\(read.text)")
        }
    }

    // MARK: 9. The summary as /openapi.json describes it

    @Test func theSummaryIsDescribedFieldByFieldInTheDocument() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("coins.100", type: "consumable", prices: ["USD": "0.99"])
            let posted = try await api.postTransaction("ned", device: "phone", try signed.signer.sign(
                Self.transaction("2000000000300901", product: "coins.100", type: "Consumable", purchased: Date().addingTimeInterval(-60),
                                 quantity: 2, price: 1980)))
            let schema = OpenAPIConformance.resolve(["$ref": "#/components/schemas/SummaryRow"])
            let documented = Set((schema["properties"] as? [String: Any] ?? [:]).keys)
            let required = Set(schema["required"] as? [String] ?? [])
            for groupBy in ["", "&groupBy=currency", "&groupBy=day,product,storefront,currency", "&groupBy=environment"] {
                let answer = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&minPosition=\(posted.position)\(groupBy)", key: api.keys["finance"])
                let rows = answer.json["rows"] as? [[String: Any]] ?? []
                #expect(!rows.isEmpty, "\(answer.text)")
                for row in rows {
                    #expect(Set(row.keys).isSubset(of: documented), "sent but not described: \(Set(row.keys).subtracting(documented))")
                    #expect(required.isSubset(of: Set(row.keys)), "described as required but not sent: \(required.subtracting(row.keys))")
                }
            }
            for name in ["purchases", "gross", "refunds", "refundedUnits", "refundedAmount", "net", "unpriced"] {
                #expect(documented.contains(name), "\(name) is not in SummaryRow")
            }
            #expect(!documented.contains("transactions") && !documented.contains("amount"), "fields never sent are not described")
            let purchases = (schema["properties"] as? [String: Any])?["purchases"] as? [String: Any]
            #expect((purchases?["description"] as? String)?.contains("renewal") == true, "purchases counts renewals: \(purchases ?? [:])")
        }
    }

    // MARK: 10. Non-renewing periods of mixed durations

    @Test func aMonthBoughtAfterAWeekFollowsTheWeek() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("pass.week", type: "non_renewing", duration: "P7D", group: "pass", prices: ["USD": "1.99"])
            try await api.defineProduct("pass.month", type: "non_renewing", duration: "P1M", group: "pass", prices: ["USD": "5.99"])
            let week = Self.date("2026-02-22T12:00:00.000Z")
            _ = try await api.postTransaction("ola", device: "phone", try signed.signer.sign(
                Self.transaction("2000000000301001", product: "pass.week", type: "Non-Renewing Subscription", purchased: week, price: 1990)))
            let posted = try await api.postTransaction("ola", device: "phone", try signed.signer.sign(
                Self.transaction("2000000000301002", product: "pass.month", type: "Non-Renewing Subscription",
                                 purchased: week.addingTimeInterval(3_600), price: 5990)))
            #expect(posted.status == 200, "\(posted.text)")
            let periods = try await api.send(.GET, "/v1/apps/\(Self.app)/users/ola/subscriptions?minPosition=\(posted.position)", key: api.keys["read"])
            let spans = (periods.json["periods"] as? [[String: Any]] ?? []).map { "\($0["productId"] ?? ""): \($0["start"] ?? "") – \($0["end"] ?? "")" }
            #expect(spans == ["pass.week: 2026-02-22T12:00:00.000Z – 2026-03-01T12:00:00.000Z",
                              "pass.month: 2026-03-01T12:00:00.000Z – 2026-04-01T12:00:00.000Z"], "\(periods.text)")
        }
    }
}
