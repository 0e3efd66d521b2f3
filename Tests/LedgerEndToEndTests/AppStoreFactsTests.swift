import AppStore
import Foundation
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// The App Store's receipt shapes, each driven through the HTTP API against the simulator and a
/// real PostgreSQL: what the receipt answer says the fold made of the facts, and what finance reads
/// in the audit trail. The harness's simulator is the sandbox's, so the audit is read with
/// `environment=sandbox` (sandbox is never revenue); case 5 adds a production simulator.
@Suite struct AppStoreFactsTests {
    static let app = APIHarness.app

    // MARK: 1. Restored auto-renewable periods

    @Test func aRestoredPeriodSeenInALaterReceiptIsARestoreNotASecondPaidRenewal() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M")
            let bought = try await api.buy("alice", "pro.monthly")
            let first = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(first.status == 200, "\(first.text)")
            #expect(first.kinds == ["receipt", "purchase", "renewal_info"])

            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])  // one renewal
            let renewed = try await api.ingest("alice", device: "phone", receipt: try await api.freshReceipt("alice"))
            #expect(renewed.kinds.filter { $0 == "renewal" }.count == 1, "\(renewed.text)")
            let renewalId = try #require(renewed.recorded.first { $0["kind"] as? String == "renewal" }?["transactionId"] as? String)

            let restore = try await api.simulator(.POST, "/admin/restores", ["userId": "alice", "bundleId": Self.app])
            #expect(restore.status == 200)
            let restoredIds = Set((restore.json["transactions"] as? [[String: Any]] ?? []).compactMap { $0["transactionId"] as? String })
            #expect(restoredIds.count == 2, "one restore per paid period: \(restore.text)")
            let restored = try await api.ingest("alice", device: "tablet", receipt: try #require(restore.json["receipt"] as? String))
            #expect(restored.status == 200, "\(restored.text)")
            let transactionKinds = restored.recorded.filter { $0["transactionId"] as? String != nil && $0["kind"] as? String != "renewal_info" }
            #expect(transactionKinds.map { $0["kind"] as? String } == ["restore", "restore"], "\(restored.text)")
            #expect(Set(transactionKinds.compactMap { $0["transactionId"] as? String }) == restoredIds)
            #expect(Set(restored.duplicates) == [bought.transactionId, renewalId])

            // One money row per web order: the purchase and the renewal, none for the restores.
            let rows = try await api.audit(user: "alice", after: restored.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "renewal"], "\(rows)")
            #expect(rows.map { $0["transactionId"] as? String } == [bought.transactionId, renewalId])
            #expect(rows.allSatisfy { $0["amount"] as? String == "0.99" && $0["revoked"] as? Bool == false })
            let summary = try await api.summary(user: "alice", after: restored.position)
            #expect(summary.count == 1 && summary.first?["purchases"] as? Int == 2 && summary.first?["gross"] as? String == "1.98",
                    "\(summary)")

            // The restores add no period: two paid periods, back to back.
            let periods = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/subscriptions?minPosition=\(restored.position)",
                                             key: api.keys["read"])
            let paid = (periods.json["periods"] as? [[String: Any]] ?? []).compactMap { $0["transactionId"] as? String }
            #expect(Set(paid) == [bought.transactionId, renewalId], "\(periods.text)")

            // Ingest judged nothing: the stream holds facts only, and each observation holds every
            // field Apple sent for the transaction, as sent.
            let types = try await api.client.query(
                "SELECT DISTINCT event_type FROM ledger.events WHERE stream_id = \("user/\(Self.app)/alice")"
            ).collect().map { try $0.decode(String.self) }
            #expect(Set(types) == ["ReceiptPosted.v1", "AppStoreTransactionObserved.v1", "RenewalInfoObserved.v1"])
            let secret = try await api.simulator(.GET, "/admin/apps/\(Self.app)").json["sharedSecret"] as? String
            let raw = try await APIHarness.send(.POST, api.simulatorBase + "/sandbox/verifyReceipt", key: nil, json: [
                "receipt-data": try #require(restore.json["receipt"] as? String), "password": secret ?? "",
            ])
            let rawRenewal = try #require((raw.json["latest_receipt_info"] as? [[String: Any]])?.first { $0["transaction_id"] as? String == renewalId })
            let stored = try await api.client.query(
                "SELECT (data->'fields')::text FROM ledger.events WHERE event_type = 'AppStoreTransactionObserved.v1' AND data->>'transactionId' = \(renewalId)"
            ).collect().map { try $0.decode(String.self) }
            let fields = try #require(stored.first.flatMap { try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: String] })
            #expect(Set(fields.keys) == Set(rawRenewal.keys), "every field Apple sent")
            #expect(rawRenewal.allSatisfy { key, value in fields[key] == "\(value)" })
        }
    }

    // MARK: The receipts and answers kept

    @Test func everyVerifiedReceiptAndAnswerIsKeptOnceByteForByteAndCannotBeChanged() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins", type: "consumable")
            let bought = try await api.buy("alice", "coins")
            let first = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(first.status == 200, "\(first.text)")
            _ = try await api.ingest("alice", device: "phone", receipt: bought.receipt)

            // The receipt once, by the SHA-256 of its text; an answer per verification, as sent.
            let receiptHash = AppStoreReceiptVerifier.sha256Hex(bought.receipt)
            let receipts = try await api.client.query("SELECT receipt_hash, receipt_data FROM ledger.receipts").collect()
                .map { try $0.decode((String, String).self) }
            #expect(receipts.count == 1 && receipts.first?.0 == receiptHash && receipts.first?.1 == bought.receipt)
            let answers = try await PostgresDocumentArchive(client: api.client, logger: APIHarness.logger).answers(toReceipt: receiptHash)
            #expect(answers.count >= 1)
            for answer in answers {
                #expect(AppStoreReceiptVerifier.sha256Hex(Data(answer.answer.utf8)) == answer.answerHash, "kept byte for byte")
                let json = try JSONSerialization.jsonObject(with: Data(answer.answer.utf8)) as? [String: Any]
                #expect(json?["status"] as? Int == 0 && json?["receipt"] != nil)
            }
            // The post in the log names the receipt and the answer it was drawn from.
            let posted = try await api.client.query(
                "SELECT data->>'receiptHash', data->>'answerHash' FROM ledger.events WHERE event_type = 'ReceiptPosted.v1'"
            ).collect().map { try $0.decode((String, String).self) }
            #expect(posted.count == 1 && posted.first?.0 == receiptHash && answers.map(\.answerHash).contains(posted.first?.1 ?? ""))

            // Append-only, for the ledger's own role too.
            for statement in [
                "UPDATE ledger.receipts SET receipt_data = 'x'", "DELETE FROM ledger.receipts", "TRUNCATE ledger.receipts",
                "UPDATE ledger.receipt_answers SET answer = '{}'", "DELETE FROM ledger.receipt_answers", "TRUNCATE ledger.receipt_answers",
            ] {
                await #expect(throws: (any Error).self, "\(statement)") {
                    try await api.client.query(PostgresQuery(unsafeSQL: statement)).collect()
                }
            }
            #expect(try await PostgresDocumentArchive(client: api.client, logger: APIHarness.logger).receipt(receiptHash) == bought.receipt)
        }
    }

    // MARK: 2. A restore of a purchase the stream never saw

    @Test func aRestoreOfAPurchaseNeverPostedGrantsOwnershipWithoutMoney() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("levels", type: "non_consumable")
            let original = try await api.buy("alice", "levels")  // never posted to the ledger
            // StoreKit restores the owned item: a new transaction pointing at the purchase, in a
            // receipt of that transaction alone (the old per-transaction style).
            let again = try await api.simulator(.POST, "/admin/purchases", ["userId": "alice", "bundleId": Self.app, "productId": "levels"])
            let restoreTransaction = try #require(again.json["transaction"] as? [String: Any])
            let restoreId = try #require(restoreTransaction["transactionId"] as? String)
            #expect(restoreTransaction["originalTransactionId"] as? String == original.transactionId)
            let receipt = try #require(again.json["transactionReceipt"] as? String)

            let posted = try await api.ingest("alice", device: "phone", receipt: receipt, price: "0.99", currency: "USD")
            #expect(posted.status == 200, "\(posted.text)")
            #expect(posted.kinds == ["receipt", "restore"])
            #expect(posted.recorded.last?["transactionId"] as? String == restoreId)
            let owned = posted.entitlements["owned"] as? [[String: Any]] ?? []
            #expect(owned.map { $0["productId"] as? String } == ["levels"])
            #expect(owned.first?["originalTransactionId"] as? String == original.transactionId)

            let entitlements = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/entitlements?minPosition=\(posted.position)",
                                                  key: api.keys["read"])
            #expect((entitlements.json["owned"] as? [[String: Any]])?.map { $0["productId"] as? String } == ["levels"], "\(entitlements.text)")

            // No money: a restore has no audit row, even with a device price posted beside it.
            #expect(try await api.audit(user: "alice", after: posted.position).isEmpty)
            #expect(try await api.summary(user: "alice", after: posted.position).isEmpty)
            #expect(try await api.audit(user: "alice", environment: "all", after: posted.position).isEmpty)
        }
    }

    // MARK: 3. A refund on a restore's transaction id

    @Test func aRefundOnARestoresTransactionRevokesThePurchase() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("levels", type: "non_consumable")
            let bought = try await api.buy("alice", "levels")
            let first = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(first.kinds == ["receipt", "purchase"])
            let restore = try await api.buy("alice", "levels")  // owned: StoreKit gives a restore
            let restored = try await api.ingest("alice", device: "tablet", receipt: restore.receipt)
            #expect(restored.kinds == ["receipt", "restore"], "\(restored.text)")
            #expect(restored.recorded.last?["transactionId"] as? String == restore.transactionId)

            let cancelled = try await api.simulator(.POST, "/admin/transactions/\(restore.transactionId)/cancel", ["reason": 0])
            #expect(cancelled.status == 200 && cancelled.json["simulatedRefund"] as? Bool == true)
            let refunded = try await api.ingest("alice", device: "tablet", receipt: try await api.freshReceipt("alice"))
            #expect(refunded.status == 200, "\(refunded.text)")
            #expect(refunded.kinds == ["receipt", "refund"], "\(refunded.text)")
            #expect(refunded.recorded.last?["transactionId"] as? String == restore.transactionId)
            #expect((refunded.entitlements["owned"] as? [Any])?.isEmpty == true, "\(refunded.text)")

            let entitlements = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/entitlements?minPosition=\(refunded.position)",
                                                  key: api.keys["read"])
            #expect((entitlements.json["owned"] as? [Any])?.isEmpty == true, "\(entitlements.text)")

            // The purchase's row, now revoked, and one refund row for the purchase; nothing for the restore.
            let rows = try await api.audit(user: "alice", after: refunded.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "refund"], "\(rows)")
            #expect(rows.allSatisfy { $0["transactionId"] as? String == bought.transactionId && $0["revoked"] as? Bool == true })
            #expect(rows.last?["amount"] as? String == "0.99")
            let summary = try await api.summary(user: "alice", after: refunded.position)
            #expect(summary.first?["refunds"] as? Int == 1 && summary.first?["refundedAmount"] as? String == "0.99", "\(summary)")
        }
    }

    // MARK: 4. A receipt with transactions of two app users

    @Test func aSharedDevicesReceiptRecordsOnlyThePostersOwnTransactions() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("levels", type: "non_consumable")
            try await api.defineProduct("coins", type: "consumable")
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M")
            // One Apple account on a family iPad: alice buys and subscribes, then bob buys once her subscription renewed.
            let alices = try await api.buy("ipad", "levels")
            let subscription = try await api.buy("ipad", "pro.monthly")
            let first = try await api.ingest("alice", device: "ipad", receipt: subscription.receipt)
            #expect(first.kinds == ["receipt", "purchase", "purchase", "renewal_info"], "\(first.text)")
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            let bobs = try await api.buy("ipad", "coins", quantity: 2)
            let renewal = try #require(
                (try await api.simulator(.GET, "/admin/users/ipad/apps/\(Self.app)").json["transactions"] as? [[String: Any]])?
                    .first { $0["productId"] as? String == "pro.monthly" && $0["transactionId"] as? String != subscription.transactionId }?["transactionId"]
                    as? String
            )

            let bob = try await api.ingest("bob", device: "ipad", receipt: bobs.receipt)
            #expect(bob.status == 200, "\(bob.text)")
            #expect(bob.kinds == ["receipt", "purchase"], "\(bob.text)")
            #expect(bob.recorded.last?["transactionId"] as? String == bobs.transactionId)
            let notRecorded = bob.json["notRecorded"] as? [[String: Any]] ?? []
            #expect(Set(notRecorded.compactMap { $0["transactionId"] as? String }) == [alices.transactionId, subscription.transactionId, renewal],
                    "alice's renewal belongs to her subscription: \(bob.text)")
            #expect(notRecorded.allSatisfy { $0["reason"] as? String == "held_by_another_user" })
            #expect(!bob.text.contains("alice"), "the answer never names the other user")
            #expect((bob.entitlements["owned"] as? [Any])?.isEmpty == true)
            #expect((bob.entitlements["subscriptions"] as? [Any])?.isEmpty == true, "\(bob.text)")
            #expect((bob.entitlements["consumables"] as? [[String: Any]])?.first?["balance"] as? Int == 2)

            // Alice posting the same later receipt gets her own (the renewal too), and bob's is left to him.
            let alice = try await api.ingest("alice", device: "ipad", receipt: bobs.receipt)
            #expect(alice.status == 200)
            #expect(alice.recorded.filter { $0["kind"] as? String == "renewal" }.map { $0["transactionId"] as? String } == [renewal],
                    "\(alice.text)")
            #expect(Set(alice.duplicates) == [alices.transactionId, subscription.transactionId], "\(alice.text)")
            #expect((alice.json["notRecorded"] as? [[String: Any]])?.map { $0["transactionId"] as? String } == [bobs.transactionId])
            #expect((alice.entitlements["owned"] as? [[String: Any]])?.map { $0["productId"] as? String } == ["levels"])
            #expect((alice.entitlements["consumables"] as? [Any])?.isEmpty == true)

            let position = max(bob.position, alice.position)
            let bobRows = try await api.audit(user: "bob", after: position)
            #expect(bobRows.map { $0["transactionId"] as? String } == [bobs.transactionId], "\(bobRows)")
            #expect(bobRows.first?["amount"] as? String == "1.98")
            let aliceRows = try await api.audit(user: "alice", after: position)
            #expect(aliceRows.map { $0["transactionId"] as? String } == [alices.transactionId, subscription.transactionId, renewal],
                    "\(aliceRows)")
            #expect(aliceRows.map { $0["event"] as? String } == ["purchase", "purchase", "renewal"])
        }
    }

    // MARK: 5. Environment-aware re-buy

    @Test func aSandboxCopyDoesNotTurnALaterProductionPurchaseIntoARestore() async throws {
        try await APIHarness.run(productionSimulator: true) { api in
            try await api.defineProduct("levels", type: "non_consumable", prices: ["USD": "1.99"])
            let sandbox = try await api.buy("alice", "levels")
            let tested = try await api.ingest("alice", device: "phone", receipt: sandbox.receipt)
            #expect(tested.status == 200, "\(tested.text)")
            #expect(tested.json["environment"] as? String == "sandbox")
            #expect(tested.kinds == ["receipt", "purchase"])

            let production = try await api.buy("alice", "levels", production: true)
            #expect(production.transactionId != sandbox.transactionId)
            let bought = try await api.ingest("alice", device: "phone", receipt: production.receipt)
            #expect(bought.status == 200, "\(bought.text)")
            #expect(bought.json["environment"] as? String == "production")
            #expect(bought.kinds == ["receipt", "purchase"], "\(bought.text)")
            #expect(bought.recorded.last?["transactionId"] as? String == production.transactionId)

            // Production (the default) has the one revenue row; the sandbox copy stays in sandbox.
            let rows = try await api.audit(user: "alice", environment: nil, after: bought.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase"], "\(rows)")
            #expect(rows.first?["transactionId"] as? String == production.transactionId)
            #expect(rows.first?["environment"] as? String == "production")
            #expect(rows.first?["amount"] as? String == "1.99" && rows.first?["priceSource"] as? String == "catalog")
            let summary = try await api.summary(user: "alice", environment: nil, after: bought.position)
            #expect(summary.count == 1 && summary.first?["gross"] as? String == "1.99" && summary.first?["purchases"] as? Int == 1,
                    "\(summary)")
            let sandboxRows = try await api.audit(user: "alice", after: bought.position)
            #expect(sandboxRows.map { $0["transactionId"] as? String } == [sandbox.transactionId])
            #expect(sandboxRows.first?["environment"] as? String == "sandbox")
        }
    }

    // MARK: 6. Prices

    @Test func pricesGoOnTheirPurchaseTrialsAreZeroOffersAreNamedAndDifferencesFlagged() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", prices: ["USD": "2.99"])
            try await api.defineProduct("levels", type: "non_consumable", prices: ["USD": "4.99"])
            try await api.defineProduct("trial.monthly", type: "auto_renewable", duration: "P1M", prices: ["USD": "2.99"],
                                        simulatorOptions: ["introOffer": ["kind": "free_trial", "periods": 1]])
            try await api.defineProduct("payg.monthly", type: "auto_renewable", duration: "P1M", prices: ["USD": "2.99"],
                                        simulatorOptions: ["introOffer": ["kind": "pay_as_you_go", "periods": 2]])

            // Alice subscribes; a renewal later comes in the receipt of her next purchase, posted with its price.
            let subscription = try await api.buy("alice", "pro.monthly")
            let subscribed = try await api.ingest("alice", device: "phone", receipt: subscription.receipt, price: "2.99", currency: "USD")
            #expect(subscribed.kinds.contains("purchase"))
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 6])
            let levels = try await api.buy("alice", "levels")
            let posted = try await api.ingest("alice", device: "phone", receipt: levels.receipt, price: "3.99", currency: "USD")
            #expect(posted.status == 200, "\(posted.text)")
            #expect(posted.kinds.filter { $0 == "renewal" }.count == 1 && posted.kinds.filter { $0 == "purchase" }.count == 1,
                    "\(posted.text)")
            #expect(posted.recorded.first { $0["kind"] as? String == "purchase" }?["transactionId"] as? String == levels.transactionId)

            // Bob's free trial, posted with the regular price the device shows; Carol's pay-as-you-go offer.
            let trial = try await api.buy("bob", "trial.monthly")
            let trialPosted = try await api.ingest("bob", device: "phone", receipt: trial.receipt, price: "2.99", currency: "USD")
            let offer = try await api.buy("carol", "payg.monthly")
            let offerPosted = try await api.ingest("carol", device: "phone", receipt: offer.receipt, price: "0.99", currency: "USD")
            #expect(trialPosted.kinds.contains("purchase") && offerPosted.kinds.contains("purchase"))
            let position = max(posted.position, trialPosted.position, offerPosted.position)

            let rows = try await api.audit(user: "alice", after: position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "renewal", "purchase"], "\(rows)")
            let purchase = try #require(rows.first { $0["transactionId"] as? String == subscription.transactionId })
            #expect(purchase["price"] as? String == "2.99" && purchase["priceSource"] as? String == "device")
            #expect(purchase["catalogPrice"] is NSNull)
            let renewal = try #require(rows.first { $0["event"] as? String == "renewal" })
            #expect(renewal["price"] as? String == "2.99" && renewal["priceSource"] as? String == "catalog",
                    "the renewal takes the catalog's price, not the device's report of the other purchase: \(renewal)")
            let owned = try #require(rows.first { $0["transactionId"] as? String == levels.transactionId })
            #expect(owned["price"] as? String == "3.99" && owned["priceSource"] as? String == "device")
            #expect(owned["catalogPrice"] as? String == "4.99", "the device's price is kept and the catalog's shown beside it")
            #expect(owned["amount"] as? String == "3.99")

            let trialRow = try #require(try await api.audit(user: "bob", after: position).first)
            #expect(trialRow["offer"] as? String == "free_trial" && trialRow["priceSource"] as? String == "trial", "\(trialRow)")
            #expect((trialRow["price"] as? String).flatMap { Decimal(string: $0) } == 0)
            #expect((trialRow["amount"] as? String).flatMap { Decimal(string: $0) } == 0)
            let offerRow = try #require(try await api.audit(user: "carol", after: position).first)
            #expect(offerRow["offer"] as? String == "intro_offer", "\(offerRow)")
            #expect(offerRow["price"] as? String == "0.99" && offerRow["priceSource"] as? String == "device")
            #expect(offerRow["catalogPrice"] is NSNull, "an offer's price is not a difference from the catalog")
        }
    }

    // MARK: 7. An upgrade within a subscription group

    @Test func anUpgradeIsAnUpgradeRowNotARefundAndEndsTheOldPeriod() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("basic", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "1.99"],
                                        simulatorOptions: ["group": "pro", "level": 2])
            try await api.defineProduct("premium", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "4.99"],
                                        simulatorOptions: ["group": "pro", "level": 1])
            let basic = try await api.buy("alice", "basic")
            let first = try await api.ingest("alice", device: "phone", receipt: basic.receipt)
            #expect(first.kinds.contains("purchase"))
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 2])
            let upgrade = try await api.simulator(.POST, "/admin/purchases", ["userId": "alice", "bundleId": Self.app, "productId": "premium"])
            #expect(upgrade.status == 201 && (upgrade.json["change"] as? [String: Any])?["kind"] as? String == "upgrade", "\(upgrade.text)")
            let premiumId = try #require((upgrade.json["transaction"] as? [String: Any])?["transactionId"] as? String)

            let upgraded = try await api.ingest("alice", device: "phone", receipt: try #require(upgrade.json["receipt"] as? String))
            #expect(upgraded.status == 200, "\(upgraded.text)")
            // Each transaction's fact, apart from Apple's renewal info (which is keyed by the original transaction id).
            let facts = upgraded.recorded.filter { $0["kind"] as? String != "renewal_info" && $0["transactionId"] as? String != nil }
            let byTransaction = Dictionary(facts.map { ($0["transactionId"] as? String ?? "", $0["kind"] as? String ?? "") },
                                           uniquingKeysWith: { first, _ in first })
            #expect(facts.count == 2 && byTransaction[premiumId] == "upgrade", "\(upgraded.text)")
            #expect(byTransaction[basic.transactionId] == "update", "the old period's is_upgraded is news, not a refund")
            #expect(!upgraded.kinds.contains("refund"))
            #expect(upgraded.kinds.contains("renewal_info"), "auto_renew_product_id moved to premium")

            let rows = try await api.audit(user: "alice", after: upgraded.position)
            #expect(rows.map { $0["event"] as? String } == ["purchase", "upgrade"], "\(rows)")
            #expect(rows.map { $0["transactionId"] as? String } == [basic.transactionId, premiumId])
            #expect(rows.allSatisfy { $0["revoked"] as? Bool == false })
            #expect(rows.last?["amount"] as? String == "4.99")
            let summary = try await api.summary(user: "alice", after: upgraded.position)
            #expect(summary.first?["refunds"] as? Int == 0 && summary.first?["gross"] as? String == "6.98", "\(summary)")

            // The old period ends where the new one starts, before its own expiry.
            let answer = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/subscriptions?minPosition=\(upgraded.position)",
                                            key: api.keys["read"])
            let periods = answer.json["periods"] as? [[String: Any]] ?? []
            let old = try #require(periods.first { $0["transactionId"] as? String == basic.transactionId }, "\(answer.text)")
            let new = try #require(periods.first { $0["transactionId"] as? String == premiumId })
            #expect(old["end"] as? String == new["start"] as? String)
            let oldStart = try #require(date(old["start"]))
            let oldEnd = try #require(date(old["end"]))
            // The clock moved two minutes before the upgrade (plus the test's own running time): cut short within the five-minute month.
            #expect(oldEnd.timeIntervalSince(oldStart) >= 120 && oldEnd.timeIntervalSince(oldStart) < 300, "\(old)")
            #expect(old["group"] as? String == "pro" && new["group"] as? String == "pro")

            let after = try #require(date(new["start"])).addingTimeInterval(1)
            let at = "\(Self.iso(after))"
            let entitlements = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/entitlements?at=\(at)&minPosition=\(upgraded.position)",
                                                  key: api.keys["read"])
            let subscriptions = entitlements.json["subscriptions"] as? [[String: Any]] ?? []
            #expect(subscriptions.first { $0["productId"] as? String == "premium" }?["active"] as? Bool == true, "\(entitlements.text)")
            #expect(subscriptions.first { $0["productId"] as? String == "basic" }?["active"] as? Bool == false)
        }
    }

    // MARK: 8. Family Sharing

    @Test func aFamilySharedTransactionGrantsTheMemberAccessAndBooksNoRevenue() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("levels", type: "non_consumable", simulatorOptions: ["familyShareable": true])
            try await api.defineProduct("family.monthly", type: "auto_renewable", duration: "P1M", simulatorOptions: ["familyShareable": true])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "olivia"])
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "max"])
            let linked = try await api.simulator(.POST, "/admin/family", ["organizerUserId": "olivia", "memberUserId": "max"])
            #expect(linked.status == 201)
            let levels = try await api.buy("olivia", "levels")
            let monthly = try await api.buy("olivia", "family.monthly")
            let organizer = try await api.ingest("olivia", device: "phone", receipt: monthly.receipt)
            #expect(organizer.kinds.filter { $0 == "purchase" }.count == 2, "\(organizer.text)")

            let member = try await api.ingest("max", device: "tablet", receipt: try await api.freshReceipt("max"))
            #expect(member.status == 200, "\(member.text)")
            let copies = member.recorded.filter { $0["kind"] as? String == "purchase" }
            #expect(Set(copies.compactMap { $0["productId"] as? String }) == ["levels", "family.monthly"], "\(member.text)")
            #expect(copies.allSatisfy { ![levels.transactionId, monthly.transactionId].contains($0["transactionId"] as? String) })
            #expect(member.json["notRecorded"] as? [Any] == nil || (member.json["notRecorded"] as? [Any])?.isEmpty == true)
            #expect((member.entitlements["owned"] as? [[String: Any]])?.map { $0["productId"] as? String } == ["levels"])
            let subscriptions = member.entitlements["subscriptions"] as? [[String: Any]] ?? []
            #expect(subscriptions.map { $0["productId"] as? String } == ["family.monthly"], "\(member.text)")
            #expect(subscriptions.first?["active"] as? Bool == true)

            let entitlements = try await api.send(.GET, "/v1/apps/\(Self.app)/users/max/entitlements?minPosition=\(member.position)",
                                                  key: api.keys["read"])
            #expect((entitlements.json["owned"] as? [[String: Any]])?.map { $0["productId"] as? String } == ["levels"], "\(entitlements.text)")

            // The organizer paid; the member's copies are access, not money.
            let position = max(organizer.position, member.position)
            #expect(try await api.audit(user: "max", after: position).isEmpty)
            #expect(try await api.summary(user: "max", after: position).isEmpty)
            let paid = try await api.audit(user: "olivia", after: position)
            #expect(Set(paid.compactMap { $0["transactionId"] as? String }) == [levels.transactionId, monthly.transactionId], "\(paid)")
            let all = try await api.summary(user: nil, after: position)
            #expect(all.reduce(0) { $0 + ($1["purchases"] as? Int ?? 0) } == 2, "\(all)")
        }
    }

    // MARK: 9. The catalog as it stood

    @Test func theCatalogIsTimeTrueForDurationsAndClassifiesProductsOnceDefined() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("season.pass", type: "non_renewing", duration: "P1M")
            let first = try await api.buy("alice", "season.pass")
            let firstPosted = try await api.ingest("alice", device: "phone", receipt: first.receipt)
            #expect(firstPosted.kinds == ["receipt", "purchase"])
            let redefined = try await api.send(.PUT, "/v1/apps/\(Self.app)/products/season.pass", key: api.keys["admin"],
                                               json: ["type": "non_renewing", "duration": "P1Y", "prices": ["USD": "0.99"]])
            #expect(redefined.json["changed"] as? Bool == true, "\(redefined.text)")
            let second = try await api.buy("alice", "season.pass")
            let secondPosted = try await api.ingest("alice", device: "phone", receipt: second.receipt)
            #expect(secondPosted.kinds == ["receipt", "purchase"])

            let answer = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/subscriptions?minPosition=\(secondPosted.position)",
                                            key: api.keys["read"])
            let periods = answer.json["periods"] as? [[String: Any]] ?? []
            let old = try #require(periods.first { $0["transactionId"] as? String == first.transactionId }, "\(answer.text)")
            let new = try #require(periods.first { $0["transactionId"] as? String == second.transactionId })
            let days = { (period: [String: Any]) -> Double in
                guard let start = date(period["start"]), let end = date(period["end"]) else { return -1 }
                return end.timeIntervalSince(start) / 86_400
            }
            #expect((28...31).contains(days(old)), "the first pass keeps the month it was sold with: \(old)")
            #expect((365...366).contains(days(new)), "the second is sold for a year: \(new)")
            #expect(new["start"] as? String == old["end"] as? String, "stacked")

            // Sold by the App Store before the catalog knew it: unknown, then classified once defined.
            _ = try await api.simulator(.PUT, "/admin/apps/\(Self.app)/products/gems.pack", ["type": "consumable"])
            let gems = try await api.buy("bob", "gems.pack", quantity: 2)
            let gemsPosted = try await api.ingest("bob", device: "phone", receipt: gems.receipt)
            #expect(gemsPosted.kinds == ["receipt", "purchase"])
            let before = try #require(try await api.audit(user: "bob", after: gemsPosted.position).first)
            #expect(before["productType"] as? String == "unknown" && before["priceSource"] as? String == "none", "\(before)")
            let unclassified = try await api.send(.GET, "/v1/audit/unclassified?minPosition=\(gemsPosted.position)", key: api.keys["finance"])
            #expect((unclassified.json["products"] as? [[String: Any]])?.map { $0["productId"] as? String } == ["gems.pack"])

            let defined = try await api.send(.PUT, "/v1/apps/\(Self.app)/products/gems.pack", key: api.keys["admin"],
                                             json: ["type": "consumable", "prices": ["USD": "1.49"]])
            let definedAt = try #require(defined.json["position"] as? Int)
            let after = try #require(try await api.audit(user: "bob", after: definedAt).first)
            #expect(after["productType"] as? String == "consumable", "\(after)")
            #expect(after["transactionId"] as? String == gems.transactionId && after["quantity"] as? Int == 2)
            let balances = try await api.send(.GET, "/v1/apps/\(Self.app)/users/bob/balances?minPosition=\(definedAt)", key: api.keys["read"])
            #expect((balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int == 2, "\(balances.text)")
            let nowClassified = try await api.send(.GET, "/v1/audit/unclassified?minPosition=\(definedAt)", key: api.keys["finance"])
            #expect((nowClassified.json["products"] as? [Any])?.isEmpty == true, "\(nowClassified.text)")
        }
    }

    // MARK: 10. Billing retry, finished consumables, cancellation reasons

    @Test func billingRetryFinishedConsumablesAndCancellationReasonsAreRecordedAsFacts() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M")
            try await api.defineProduct("coins", type: "consumable")
            try await api.defineProduct("levels", type: "non_consumable")

            // Billing fails at the renewal: Apple's pending_renewal_info says retry, with a grace period.
            let subscription = try await api.buy("alice", "pro.monthly")
            #expect(try await api.ingest("alice", device: "phone", receipt: subscription.receipt).status == 200)
            let failing = try await api.simulator(.POST, "/admin/subscriptions/\(subscription.transactionId)/billing",
                                                  ["failing": true, "gracePeriodDays": 16])
            #expect(failing.status == 200)
            _ = try await api.simulator(.POST, "/admin/clock/advance", ["minutes": 12])
            let retrying = try await api.ingest("alice", device: "phone", receipt: try await api.freshReceipt("alice"))
            #expect(retrying.status == 200, "\(retrying.text)")
            #expect(retrying.kinds.contains("renewal_info") && !retrying.kinds.contains("renewal"), "\(retrying.text)")
            let history = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/history", key: api.keys["read"])
            let infos = (history.json["events"] as? [[String: Any]] ?? []).filter { $0["type"] as? String == "RenewalInfoObserved.v1" }
            #expect(infos.count == 2, "\(history.text)")
            let info = (infos.last?["data"] as? [String: Any])?["fields"] as? [String: Any] ?? [:]
            #expect(info["is_in_billing_retry_period"] as? String == "1", "\(info)")
            #expect(info["expiration_intent"] as? String == "2")
            #expect(info["grace_period_expires_date_ms"] as? String != nil && info["grace_period_expires_date"] as? String != nil)
            #expect(info["original_transaction_id"] as? String == subscription.transactionId)
            // In the grace period the subscription stays active, until the grace period ends.
            let at = try await api.simulator(.GET, "/admin/clock").json["now"] as? String ?? ""
            let during = try await api.send(.GET, "/v1/apps/\(Self.app)/users/alice/entitlements?minPosition=\(retrying.position)&at=\(at)",
                                            key: api.keys["read"])
            let pro = (during.json["subscriptions"] as? [[String: Any]])?.first
            #expect(pro?["active"] as? Bool == true, "\(during.text)")
            let graceEnd = (info["grace_period_expires_date_ms"] as? String).flatMap { Int64($0) }
            #expect(date(pro?["activeUntil"])?.milliseconds == graceEnd, "\(during.text)")

            // A finished consumable leaves later receipts: no refund, the balance stays.
            let coins = try await api.buy("bob", "coins", quantity: 3)
            let bought = try await api.ingest("bob", device: "phone", receipt: coins.receipt)
            #expect((bought.entitlements["consumables"] as? [[String: Any]])?.first?["balance"] as? Int == 3)
            _ = try await api.simulator(.POST, "/admin/transactions/\(coins.transactionId)/finish")
            let finished = try await api.send(.POST, "/v1/apps/\(Self.app)/transactions/\(coins.transactionId)/finish",
                                              key: api.keys["ingest"], json: ["deviceId": "phone"])
            #expect(finished.status == 200, "\(finished.text)")
            let more = try await api.buy("bob", "coins", quantity: 2)
            let receiptWithoutFirst = try await api.ingest("bob", device: "phone", receipt: more.receipt)
            #expect(receiptWithoutFirst.kinds == ["receipt", "purchase"], "\(receiptWithoutFirst.text)")
            #expect(receiptWithoutFirst.duplicates.isEmpty, "the finished purchase is not in the receipt")
            #expect((receiptWithoutFirst.entitlements["consumables"] as? [[String: Any]])?.first?["balance"] as? Int == 5)
            let coinRows = try await api.audit(user: "bob", after: receiptWithoutFirst.position)
            #expect(coinRows.map { $0["event"] as? String } == ["purchase", "purchase"], "\(coinRows)")
            #expect(coinRows.allSatisfy { $0["revoked"] as? Bool == false })

            // A refund's cancellation_reason is kept on the observed fact.
            let levels = try await api.buy("carol", "levels")
            #expect(try await api.ingest("carol", device: "phone", receipt: levels.receipt).status == 200)
            _ = try await api.simulator(.POST, "/admin/transactions/\(levels.transactionId)/cancel", ["reason": 1])
            let refunded = try await api.ingest("carol", device: "phone", receipt: try await api.freshReceipt("carol"))
            #expect(refunded.kinds == ["receipt", "refund"], "\(refunded.text)")
            let carol = try await api.send(.GET, "/v1/apps/\(Self.app)/users/carol/history", key: api.keys["read"])
            let observed = (carol.json["events"] as? [[String: Any]] ?? []).filter { $0["type"] as? String == "AppStoreTransactionObserved.v1" }
            #expect(observed.count == 2)
            let fields = (observed.last?["data"] as? [String: Any])?["fields"] as? [String: Any] ?? [:]
            #expect(fields["cancellation_reason"] as? String == "1", "\(fields)")
            #expect(fields["cancellation_date_ms"] as? String != nil)
            let carolRows = try await api.audit(user: "carol", after: refunded.position)
            #expect(carolRows.map { $0["event"] as? String } == ["purchase", "refund"], "\(carolRows)")
        }
    }

    // MARK: Helpers

    static func iso(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

private func date(_ value: Any?) -> Date? {
    guard let text = value as? String else { return nil }
    let formatter = ISO8601DateFormatter()
    formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    if let date = formatter.date(from: text) { return date }
    formatter.formatOptions = [.withInternetDateTime]
    return formatter.date(from: text)
}

extension APIHarness.Answer {
    var recorded: [[String: Any]] { json["recorded"] as? [[String: Any]] ?? [] }
    var kinds: [String] { recorded.compactMap { $0["kind"] as? String } }
    var duplicates: [String] { (json["duplicates"] as? [[String: Any]] ?? []).compactMap { $0["transactionId"] as? String } }
    var position: Int { json["position"] as? Int ?? 0 }
    var entitlements: [String: Any] { json["entitlements"] as? [String: Any] ?? [:] }
}

extension APIHarness {
    /// A fresh app receipt of the simulator user (renewals up to the simulator's now included).
    func freshReceipt(_ user: String) async throws -> String {
        let answer = try await simulator(.GET, "/admin/users/\(user)/apps/\(Self.app)")
        guard let receipt = answer.json["receipt"] as? String else { throw HarnessError(message: "no receipt for \(user): \(answer.text)") }
        return receipt
    }

    /// The audit rows of `user` once the trail reached `position`; `environment` nil reads the default (production).
    func audit(user: String?, environment: String? = "sandbox", after position: Int) async throws -> [[String: Any]] {
        let answer = try await send(.GET, "/v1/audit/events?\(Self.query(user: user, environment: environment, position: position))",
                                    key: keys["finance"])
        guard answer.status == 200 else { throw HarnessError(message: "audit events: \(answer.status) \(answer.text)") }
        return answer.json["events"] as? [[String: Any]] ?? []
    }

    /// The audit summary by currency.
    func summary(user: String?, environment: String? = "sandbox", after position: Int) async throws -> [[String: Any]] {
        let query = Self.query(user: user, environment: environment, position: position) + "&groupBy=currency"
        let answer = try await send(.GET, "/v1/audit/summary?\(query)", key: keys["finance"])
        guard answer.status == 200 else { throw HarnessError(message: "audit summary: \(answer.status) \(answer.text)") }
        return answer.json["rows"] as? [[String: Any]] ?? []
    }

    private static func query(user: String?, environment: String?, position: Int) -> String {
        var parts = ["minPosition=\(position)"]
        if let environment { parts.append("environment=\(environment)") }
        if let user { parts.append("userId=\(user)") }
        return parts.joined(separator: "&")
    }
}
