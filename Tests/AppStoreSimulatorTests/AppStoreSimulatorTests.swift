@testable import AppStore
import Foundation
import LedgerDomain
import LedgerTesting
import NIOHTTP1
import Testing

/// The simulator end to end, through the real client over loopback HTTP.
@Suite struct AppStoreSimulatorTests {
    let bundle = "com.example.app"

    @Test func purchaseWithQuantityVerifiesAsAPurchase() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "coins", quantity: 3)
            let receipt = try await sim.verifier().verify(ReceiptVerificationRequest(receiptData: bought.receipt), logger: quietLogger)
            #expect(receipt.environment == .sandbox)
            #expect(receipt.bundleId == bundle)
            #expect(receipt.style == .appReceipt)
            #expect(receipt.receiptSHA256 == AppStoreReceiptVerifier.sha256Hex(bought.receipt))
            let transaction = try #require(receipt.transactions.first)
            #expect(receipt.transactions.count == 1)
            #expect(transaction.transactionId == bought.id)
            #expect(transaction.kind == .purchase)
            #expect(transaction.quantity == 3)
            #expect(transaction.expiresDate == nil)
            #expect(receipt.latestReceipt == nil, "no subscription, no latest_receipt")
        }
    }

    @Test func theAppReceiptGrowsWithEachPurchase() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.defineProduct(bundle, "pro", type: "non_consumable")
            try await sim.createUser("alice")
            _ = try await sim.purchase("alice", bundle, "coins")
            let second = try await sim.purchase("alice", bundle, "pro")
            let receipt = try await sim.verifier().verify(ReceiptVerificationRequest(receiptData: second.receipt), logger: quietLogger)
            #expect(receipt.transactions.map(\.productId) == ["coins", "pro"])
        }
    }

    @Test func aLongHistoryVerifiesEveryTransactionOnce() async throws {
        try await withSimulator(environment: .production) { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            var last = ""
            for index in 0..<40 {
                last = try await sim.purchase("alice", bundle, "coins", quantity: 1 + index % 3).receipt
            }
            _ = try await sim.purchase("alice", bundle, "monthly")
            try await sim.advance(minutes: 60 * 24 * 95)  // three renewals (calendar months)
            let receipt = try await sim.verifier().verify(
                ReceiptVerificationRequest(receiptData: last, sharedSecret: try await sim.sharedSecret(bundle)), logger: quietLogger
            )
            // The old receipt covers 40 purchases; latest_receipt_info adds the subscription and its renewals.
            #expect(receipt.transactions.count == 44)
            #expect(Set(receipt.transactions.map(\.transactionId)).count == 44)
            #expect(receipt.transactions.filter { $0.productId == "coins" }.map(\.quantity).reduce(0, +) == 79)
            #expect(receipt.transactions.filter { $0.kind == .renewal }.count == 3)
        }
    }

    @Test func tamperedAndForeignReceiptsAreNotAuthentic() async throws {
        try await withSimulator(signingKey: "key-one") { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "coins")

            // Change one digit of the transaction id inside the signed payload.
            let envelopeData = try #require(Data(base64Encoded: bought.receipt))
            var envelope = try #require(try JSONSerialization.jsonObject(with: envelopeData) as? [String: String])
            let payloadText = try #require(envelope["payload"])
            let payloadData = try #require(Data(base64Encoded: payloadText))
            var payload = String(decoding: payloadData, as: UTF8.self)
            payload = payload.replacingOccurrences(of: bought.id, with: String(bought.id.dropLast()) + "9")
            envelope["payload"] = Data(payload.utf8).base64EncodedString()
            let tampered = try JSONSerialization.data(withJSONObject: envelope).base64EncodedString()

            let verifier = sim.verifier()
            for receiptData in [tampered, "bm90IGEgcmVjZWlwdA=="] {
                let error = try await #require(throws: ReceiptVerificationError.self) {
                    try await verifier.verify(ReceiptVerificationRequest(receiptData: receiptData), logger: quietLogger)
                }
                #expect(error.status?.code == 21003)
            }

            // Same purchase made in another simulator, signed with another key.
            let foreign = try await withSimulator(signingKey: "key-two") { other in
                try await other.defineProduct(bundle, "coins", type: "consumable")
                try await other.createUser("alice")
                return try await other.purchase("alice", bundle, "coins").receipt
            }
            let error = try await #require(throws: ReceiptVerificationError.self) {
                try await verifier.verify(ReceiptVerificationRequest(receiptData: foreign), logger: quietLogger)
            }
            #expect(error.code == .invalidReceipt)
            #expect(error.status?.code == 21003)
        }
    }

    @Test func malformedRequestsAnswer21000And21002() async throws {
        try await withSimulator { sim in
            let notJSON = try await sendJSON(.POST, sim.verifyURL, nil)
            #expect(LenientJSON(notJSON.json)["status"].int == 21000)
            let missing = try await sendJSON(.POST, sim.verifyURL, ["password": "x"])
            #expect(LenientJSON(missing.json)["status"].int == 21002)
            let notBase64 = try await sendJSON(.POST, sim.verifyURL, ["receipt-data": "%%%"])
            #expect(LenientJSON(notBase64.json)["status"].int == 21002)
            #expect(notBase64.status == 200, "verifyReceipt answers every status with HTTP 200")
        }
    }

    @Test func autoRenewableReceiptsNeedTheSharedSecret() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "monthly")
            let verifier = sim.verifier()
            for secret in [nil, SharedSecret("wrong")] {
                let error = try await #require(throws: ReceiptVerificationError.self) {
                    try await verifier.verify(ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: secret), logger: quietLogger)
                }
                #expect(error.status?.code == 21004)
            }
            let secret = try await sim.sharedSecret(bundle)
            let receipt = try await verifier.verify(ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: secret), logger: quietLogger)
            #expect(receipt.transactions.first?.expiresDate != nil)

            try await sim.admin(.PUT, "/admin/apps/\(bundle)", ["sharedSecret": "chosen-secret"])
            let chosen = try await verifier.verify(
                ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: SharedSecret("chosen-secret")), logger: quietLogger
            )
            #expect(chosen.transactions.count == 1)
        }
    }

    @Test func receiptsAreRedirectedToTheirOwnEnvironment() async throws {
        // Two simulators with one key, as Apple's two environments share one signer.
        try await withSimulator(environment: .production, signingKey: "shared") { production in
            try await withSimulator(environment: .sandbox, signingKey: "shared") { sandbox in
                try await sandbox.defineProduct(bundle, "coins", type: "consumable")
                try await sandbox.createUser("tester")
                let bought = try await sandbox.purchase("tester", bundle, "coins")

                let raw = try await sendJSON(.POST, production.verifyURL, ["receipt-data": bought.receipt])
                #expect(LenientJSON(raw.json)["status"].int == 21007)

                let verifier = production.verifier(sandboxURL: sandbox.verifyURL)
                let receipt = try await verifier.verify(ReceiptVerificationRequest(receiptData: bought.receipt), logger: quietLogger)
                #expect(receipt.environment == .sandbox)
                #expect(receipt.transactions.first?.transactionId == bought.id)

                try await production.defineProduct(bundle, "coins", type: "consumable")
                try await production.createUser("customer")
                let real = try await production.purchase("customer", bundle, "coins")
                let wrongWay = try await sendJSON(.POST, sandbox.verifyURL, ["receipt-data": real.receipt])
                #expect(LenientJSON(wrongWay.json)["status"].int == 21008)
                let verified = try await verifier.verify(ReceiptVerificationRequest(receiptData: real.receipt), logger: quietLogger)
                #expect(verified.environment == .production)
                let sandboxFirst = try await verifier.verify(
                    ReceiptVerificationRequest(receiptData: real.receipt, firstEnvironment: .sandbox), logger: quietLogger
                )
                #expect(sandboxFirst.environment == .production, "21008 from the sandbox sends it to production")
            }
        }
    }

    @Test func sandboxSubscriptionsRenewEveryFiveMinutesAndStopAfterSix() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "monthly")
            let request = ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: try await sim.sharedSecret(bundle))
            let verifier = sim.verifier()

            try await sim.advance(minutes: 12)
            let early = try await verifier.verify(request, logger: quietLogger)
            #expect(early.transactions.map(\.kind) == [.purchase, .renewal, .renewal])
            #expect(early.transactions.allSatisfy { $0.originalTransactionId == bought.id })
            for (previous, next) in zip(early.transactions, early.transactions.dropFirst()) {
                #expect(next.purchaseDate.timeIntervalSince(previous.purchaseDate).rounded() == 300)
                #expect(next.purchaseDate == previous.expiresDate)
            }
            #expect(early.pendingRenewals.first?.willAutoRenew == true)
            let latest = try #require(early.latestReceipt)

            try await sim.advance(minutes: 120)
            let late = try await verifier.verify(request, logger: quietLogger)
            #expect(late.transactions.count == 7, "the purchase and six renewals, no more")
            #expect(late.transactions.filter { $0.kind == .renewal }.count == 6)
            #expect(late.pendingRenewals.first?.willAutoRenew == false)
            #expect(late.pendingRenewals.first?.expirationIntent == 1)

            // The latest receipt handed out earlier is itself a receipt of the subscription.
            let fromLatest = try await verifier.verify(
                ReceiptVerificationRequest(receiptData: latest, sharedSecret: request.sharedSecret), logger: quietLogger
            )
            #expect(fromLatest.transactions.count == 7)
        }
    }

    @Test func productionSubscriptionsRenewOnTheCalendarWithoutACap() async throws {
        try await withSimulator(environment: .production) { sim in
            try await sim.defineProduct(bundle, "weekly", type: "auto_renewable", duration: "P7D")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "weekly")
            try await sim.advance(minutes: 60 * 24 * 60)  // 60 days
            let receipt = try await sim.verifier().verify(
                ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: try await sim.sharedSecret(bundle)), logger: quietLogger
            )
            #expect(receipt.environment == .production)
            #expect(receipt.transactions.filter { $0.kind == .renewal }.count == 8, "renewals on days 7, 14, ... 56")
            let periods = receipt.transactions.compactMap { t in t.expiresDate.map { $0.timeIntervalSince(t.purchaseDate) } }
            #expect(periods.count == 9 && periods.allSatisfy { abs($0 - 7 * 86_400) < 0.01 })
            #expect(receipt.pendingRenewals.first?.willAutoRenew == true)
        }
    }

    @Test func excludeOldTransactionsKeepsOnlyTheLatestRenewal() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "weekly", type: "auto_renewable", duration: "P7D")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "weekly")
            try await sim.advance(minutes: 10)  // 3-minute periods: 3 renewals
            let answer = try await sendJSON(.POST, sim.verifyURL, [
                "receipt-data": bought.receipt,
                "password": try await sim.sharedSecret(bundle).value,
                "exclude-old-transactions": true,
            ])
            let json = LenientJSON(answer.json)
            #expect(json["latest_receipt_info"].array?.count == 1)
            #expect(json["receipt"]["in_app"].array?.count == 1)
            let full = try await sim.verifier().verify(
                ReceiptVerificationRequest(receiptData: bought.receipt, sharedSecret: try await sim.sharedSecret(bundle), excludeOldTransactions: true),
                logger: quietLogger
            )
            #expect(full.transactions.count == 2, "the receipt's own purchase and the latest renewal")
        }
    }

    /// One simulator behind both of the ledger's URLs, as the README suggests for working without
    /// Apple: a sandbox receipt sent to the production path answers 21007, so the client asks the
    /// sandbox path and the receipt is the sandbox's, even an iOS 6 transaction receipt whose answer
    /// names no environment.
    @Test(arguments: [StoreEnvironment.sandbox, .production])
    func environmentComesFromTheServiceThatAcceptedTheReceipt(boughtIn environment: StoreEnvironment) async throws {
        try await withSimulator(environment: environment) { sim in
            try await sim.defineProduct(bundle, "levels", type: "non_consumable")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "levels")
            let verifier = sim.verifier(sandboxURL: sim.base + "/sandbox/verifyReceipt", productionURL: sim.base + "/production/verifyReceipt")
            for receipt in [bought.transactionReceipt, bought.receipt] {
                let verified = try await verifier.verify(ReceiptVerificationRequest(receiptData: receipt), logger: quietLogger)
                #expect(verified.environment == environment)
                #expect(verified.appStoreAnswer.environment == environment)
            }
            let other = environment == .sandbox ? "production" : "sandbox"
            let (status, json) = try await sendJSON(.POST, sim.base + "/\(other)/verifyReceipt", ["receipt-data": bought.transactionReceipt])
            #expect(status == 200)
            #expect((json as? [String: Any])?["status"] as? Int == (environment == .sandbox ? 21007 : 21008))
        }
    }

    @Test func oldStyleReceiptShowsTheLatestRenewalWhileActiveAnd21006WhenExpired() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "weekly", type: "auto_renewable", duration: "P7D")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "weekly")
            let request = ReceiptVerificationRequest(receiptData: bought.transactionReceipt, sharedSecret: try await sim.sharedSecret(bundle))
            let verifier = sim.verifier()

            try await sim.advance(minutes: 4)
            let active = try await verifier.verify(request, logger: quietLogger)
            #expect(active.style == .transactionReceipt)
            #expect(active.status.code == 0)
            #expect(active.transactions.map(\.kind) == [.purchase, .renewal])
            #expect(active.latestReceipt != nil)

            try await sim.advance(minutes: 60)
            let expired = try await verifier.verify(request, logger: quietLogger)
            #expect(expired.status.code == 21006)
            #expect(expired.transactions.last?.kind == .renewal)
            #expect(expired.transactions.count == 2, "the receipt's own transaction and the last renewal")
            #expect(expired.latestReceipt == nil)
        }
    }

    @Test func supportCancellationRevokesAndStopsRenewals() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.createUser("alice")
            let coins = try await sim.purchase("alice", bundle, "coins", quantity: 2)
            let subscription = try await sim.purchase("alice", bundle, "monthly")
            let secret = try await sim.sharedSecret(bundle)
            let verifier = sim.verifier()

            let cancelled = try await sim.admin(.POST, "/admin/transactions/\(coins.id)/cancel", ["reason": 1])
            #expect(cancelled.status == 200)
            let again = try await sim.admin(.POST, "/admin/transactions/\(coins.id)/cancel", [:])
            #expect(again.status == 409)

            try await sim.advance(minutes: 2)
            _ = try await sim.admin(.POST, "/admin/transactions/\(subscription.id)/cancel")
            try await sim.advance(minutes: 30)

            let receipt = try await verifier.verify(
                ReceiptVerificationRequest(receiptData: subscription.receipt, sharedSecret: secret), logger: quietLogger
            )
            let refunded = try #require(receipt.transaction(coins.id))
            #expect(refunded.isRevoked)
            #expect(refunded.cancellationReason == 1)
            #expect(receipt.transaction(subscription.id)?.isRevoked == true)
            #expect(receipt.transactions.filter { $0.kind == .renewal }.isEmpty, "a cancelled subscription does not renew")
            #expect(receipt.pendingRenewals.first?.willAutoRenew == false)

            let oldStyle = try await verifier.verify(
                ReceiptVerificationRequest(receiptData: subscription.transactionReceipt, sharedSecret: secret), logger: quietLogger
            )
            #expect(oldStyle.status.code == 21006, "a cancelled subscription receipt answers 21006")
        }
    }

    @Test func signedViewsGiveTheQuantitysTotalAndHowARefundTookItBack() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable", options: ["price": "0.99", "currency": "USD"])
            try await sim.defineProduct(bundle, "gems", type: "consumable", options: ["price": "1.99", "currency": "EUR", "advancedCommerce": true])
            try await sim.createUser("alice")
            let coins = try await sim.purchase("alice", bundle, "coins", quantity: 3)
            let gems = try await sim.purchase("alice", bundle, "gems", quantity: 2)
            /// The user's signed transactions, decoded, by id.
            func signedViews() async throws -> [String: [String: Any]] {
                let listed = try await sim.admin(.GET, "/admin/users/alice/apps/\(bundle)")
                var views: [String: [String: Any]] = [:]
                for jws in listed.json["signedTransactions"].array ?? [] {
                    let part = try #require(jws.string?.split(separator: ".").dropFirst().first)
                    let data = try #require(Base64URL.decode(String(part)))
                    let payload = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
                    views[payload["transactionId"] as? String ?? ""] = payload
                }
                return views
            }
            var views = try await signedViews()
            #expect(views[coins.id]?["price"] as? Int == 2970 && views[coins.id]?["quantity"] as? Int == 3, "Apple's price is the total")
            let commerce = try #require(views[gems.id]?["advancedCommerceInfo"] as? [String: Any])
            #expect((commerce["items"] as? [[String: Any]])?.first?["price"] as? Int == 3980 && views[gems.id]?["currency"] as? String == "EUR")

            let refused = try await sim.admin(.POST, "/admin/transactions/\(coins.id)/cancel", ["percentage": 100_001])
            #expect(refused.status == 400 && refused.json["error"]["message"].string?.contains("40000 is 40 %") == true)
            #expect(try await sim.admin(.POST, "/admin/transactions/\(coins.id)/cancel", ["percentage": 33333]).status == 200)
            #expect(try await sim.admin(.POST, "/admin/transactions/\(gems.id)/cancel", [:]).status == 200)
            views = try await signedViews()
            #expect(views[coins.id]?["revocationType"] as? String == "REFUND_PRORATED" && views[coins.id]?["revocationPercentage"] as? Int == 33333)
            #expect(views[gems.id]?["revocationType"] as? String == "REFUND_FULL" && views[gems.id]?["revocationPercentage"] == nil)
        }
    }

    @Test func notificationsAboutTheAppNeedAKnownTypeAndAURL() async throws {
        try await withSimulator { sim in
            _ = try await sim.admin(.PUT, "/admin/apps/\(bundle)")
            let noURL = try await sim.admin(.POST, "/admin/apps/\(bundle)/notifications", ["type": "TEST"])
            #expect(noURL.status == 409 && noURL.json["error"]["message"].string?.contains("notificationURL") == true)
            _ = try await sim.admin(.PUT, "/admin/apps/\(bundle)", ["notificationURL": "http://127.0.0.1:9/notifications"])
            let unknown = try await sim.admin(.POST, "/admin/apps/\(bundle)/notifications", ["type": "DID_RENEW"])
            #expect(unknown.status == 400 && unknown.json["error"]["message"].string?.contains("EXTERNAL_PURCHASE_TOKEN") == true)
            let queued = try await sim.admin(.POST, "/admin/apps/\(bundle)/notifications", ["type": "EXTERNAL_PURCHASE_TOKEN"])
            #expect(queued.status == 202 && queued.json["notificationUUID"].string != nil)
            let listed = try await sim.admin(.GET, "/admin/notifications")
            let token = try #require(listed.json["notifications"].array?.first { $0["notificationType"].string == "EXTERNAL_PURCHASE_TOKEN" })
            #expect(token["subtype"].string == "UNREPORTED" && token["transactionId"].string == nil)
        }
    }

    @Test func restoreGivesNewTransactionsPointingAtTheOriginals() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "pro", type: "non_consumable")
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.createUser("alice")
            let pro = try await sim.purchase("alice", bundle, "pro")
            _ = try await sim.purchase("alice", bundle, "coins")
            let restored = try await sim.admin(.POST, "/admin/restores", ["userId": "alice", "bundleId": bundle])
            #expect(restored.status == 200)
            #expect(restored.json["transactions"].array?.count == 1, "consumables are not restored")
            let receiptData = try #require(restored.json["receipt"].string)
            let receipt = try await sim.verifier().verify(ReceiptVerificationRequest(receiptData: receiptData), logger: quietLogger)
            let restore = try #require(receipt.transactions.first { $0.kind == .restore })
            #expect(restore.originalTransactionId == pro.id)
            #expect(restore.productId == "pro")
            #expect(restore.transactionId != pro.id)

            let history = try await sim.admin(.GET, "/admin/users/alice/apps/\(bundle)")
            #expect(history.json["transactions"].array?.map { $0["productId"].string ?? "" } == ["pro", "coins", "pro"])
            let unknownApp = try await sim.admin(.GET, "/admin/users/alice/apps/com.example.other")
            #expect(unknownApp.status == 404)

            // Buying an owned non-consumable again is not a second purchase either.
            let rebuy = try await sim.purchase("alice", bundle, "pro")
            let rebought = try await sim.verifier().verify(ReceiptVerificationRequest(receiptData: rebuy.receipt), logger: quietLogger)
            #expect(rebought.transaction(rebuy.id)?.kind == .restore)
        }
    }

    @Test func faultsMakeTheSimulatorUnavailableForTheNextCalls() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "coins")
            let request = ReceiptVerificationRequest(receiptData: bought.receipt)
            let retrying = sim.verifier(retry: RetryPolicy(maximumAttempts: 3, initialDelay: .milliseconds(1), maximumDelay: .milliseconds(2)))

            try await sim.admin(.PUT, "/admin/faults", ["failNext": 2])
            let recovered = try await retrying.verify(request, logger: quietLogger)
            #expect(recovered.transactions.count == 1)

            try await sim.admin(.PUT, "/admin/faults", ["failNext": 5])
            let error = try await #require(throws: ReceiptVerificationError.self) {
                try await retrying.verify(request, logger: quietLogger)
            }
            #expect(error.code == .unavailable)
            #expect(error.status?.code == 21005)
            let left = try await sim.admin(.GET, "/admin/faults")
            #expect(left.json["failNext"].int == 2)

            try await sim.admin(.PUT, "/admin/faults", ["failNext": 1, "failStatus": 21150, "isRetryable": true])
            #expect(try await retrying.verify(request, logger: quietLogger).transactions.count == 1)

            try await sim.admin(.PUT, "/admin/faults", ["latencyMilliseconds": 1_000])
            let slow = try await #require(throws: ReceiptVerificationError.self) {
                try await sim.verifier(timeout: .milliseconds(100)).verify(request, logger: quietLogger)
            }
            #expect(slow.code == .unavailable)
            try await sim.admin(.DELETE, "/admin/faults")
            #expect(try await sim.verifier().verify(request, logger: quietLogger).transactions.count == 1)
        }
    }

    @Test func adminAPIRefusesWhatItCannotDoWithAnActionableMessage() async throws {
        try await withSimulator { sim in
            let noDuration = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/monthly", ["type": "auto_renewable"])
            #expect(noDuration.status == 400)
            #expect(noDuration.json["error"]["message"].string?.contains("P1M") == true)
            let badType = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/x", ["type": "rental"])
            #expect(badType.status == 400)
            let unknownType = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/x", ["type": "unknown"])
            #expect(unknownType.status == 400)
            #expect(unknownType.json["error"]["message"].string?.contains("free_subscription") == true)
            let badDuration = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/x", ["type": "non_renewing", "duration": "P5D"])
            #expect(badDuration.status == 400)
            try await sim.defineProduct(bundle, "pro", type: "non_consumable")
            let noUser = try await sim.admin(.POST, "/admin/purchases", ["userId": "ghost", "bundleId": bundle, "productId": "pro"])
            #expect(noUser.status == 404)
            #expect(noUser.json["error"]["message"].string?.contains("/admin/users") == true)
            try await sim.createUser("alice")
            let duplicateUser = try await sim.admin(.POST, "/admin/users", ["userId": "alice"])
            #expect(duplicateUser.status == 409)
            let madeUp = try await sim.admin(.POST, "/admin/users")
            #expect(madeUp.status == 201)
            #expect(madeUp.json["userId"].string == "user-1")
            let tooMany = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "pro", "quantity": 2])
            #expect(tooMany.status == 400)
            let noProduct = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "nope"])
            #expect(noProduct.status == 404)
        }
    }

    @Test func activeSubscriptionCannotBeBoughtTwice() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            _ = try await sim.purchase("alice", bundle, "monthly")
            let twice = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "monthly"])
            #expect(twice.status == 409)
            try await sim.advance(minutes: 40)
            let afterExpiry = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "monthly"])
            #expect(afterExpiry.status == 201, "after six renewals the subscription expired and can be bought again")
        }
    }

    @Test func clockStartsNowAndOnlyMovesForward() async throws {
        try await withSimulator { sim in
            let before = Date()
            let clock = try await sim.admin(.GET, "/admin/clock")
            let now = try #require(clock.json["nowMs"].int64)
            #expect(abs(Double(now) / 1000 - before.timeIntervalSince1970) < 60)
            let advanced = try await sim.admin(.POST, "/admin/clock/advance", ["minutes": 90])
            #expect(advanced.json["offsetSeconds"].int == 5_400)
            #expect((advanced.json["nowMs"].int64 ?? 0) - now >= 5_400_000)
            let backwards = try await sim.admin(.POST, "/admin/clock/advance", ["seconds": -1])
            #expect(backwards.status == 400)
        }
    }
}

/// The shape of a transaction by its ids and expiry, for checking what the simulator lists. What
/// it means is the ledger's classifier's to say.
enum TransactionShape: Equatable { case purchase, renewal, restore }

extension ReceiptTransaction {
    var kind: TransactionShape { TransactionShape(transactionId, originalTransactionId, expiresDate) }
}

extension TransactionShape {
    init(_ id: String, _ original: String, _ expires: Date?) {
        self = id == original ? .purchase : expires == nil ? .restore : .renewal
    }
}
