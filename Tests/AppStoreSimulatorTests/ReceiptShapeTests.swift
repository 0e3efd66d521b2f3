@testable import AppStore
import Foundation
import LedgerDomain
import LedgerTesting
import NIOHTTP1
import Testing

/// The shapes of Apple's `verifyReceipt` answers the simulator produces, read from the raw JSON:
/// ownership, trial and offer flags, groups and upgrades, restores of subscriptions, Family Sharing,
/// billing retry and grace periods, auto-renew, refunds and finished consumables.
@Suite struct ReceiptShapeTests {
    let bundle = "com.example.shapes"
    /// A sandbox P1M period.
    let month: Int64 = 5 * 60 * 1000

    @Test func everyTransactionCarriesOwnershipTrialAndSubscriptionKeys() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.defineProduct(bundle, "levels", type: "non_consumable")
            try await sim.defineProduct(bundle, "pro.monthly", type: "auto_renewable", duration: "P1M", options: ["group": "pro", "level": 1])
            let group = try await sim.admin(.GET, "/admin/apps/\(bundle)/products").json.array?
                .first { $0["productId"].string == "pro.monthly" }?["subscriptionGroupIdentifier"].string
            let groupId = try #require(group)
            try await sim.createUser("alice")
            _ = try await sim.purchase("alice", bundle, "coins", quantity: 2)
            _ = try await sim.purchase("alice", bundle, "levels")
            let subscription = try await sim.purchase("alice", bundle, "pro.monthly")
            try await sim.advance(minutes: 6)  // one renewal

            let answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let inApp = try #require(answer["receipt"]["in_app"].array)
            let latest = try #require(answer["latest_receipt_info"].array)
            #expect(inApp.count == 4 && latest.count == 4)
            for entry in inApp + latest {
                #expect(entry["in_app_ownership_type"].string == "PURCHASED")
                #expect(entry["is_trial_period"].string == "false")
                for key in ["purchase_date", "original_purchase_date"] { expectDateTriple(entry, key) }
                if entry["product_id"].string == "pro.monthly" {
                    #expect(entry["is_in_intro_offer_period"].string == "false")
                    #expect(entry["web_order_line_item_id"].string != nil)
                    #expect(entry["subscription_group_identifier"].string == groupId)
                    #expect(entry["original_transaction_id"].string == subscription.id)
                    expectDateTriple(entry, "expires_date")
                    #expect(!entry["is_upgraded"].isPresent, "is_upgraded appears only on an upgraded period")
                } else {
                    for key in ["is_in_intro_offer_period", "web_order_line_item_id", "subscription_group_identifier", "expires_date"] {
                        #expect(!entry[key].isPresent, "\(key) is for auto-renewables only")
                    }
                }
            }
            let webOrders = latest.compactMap { $0["web_order_line_item_id"].string }
            #expect(Set(webOrders).count == 2, "the purchase and the renewal each have a web order of their own")

            // The old per-transaction receipt of the subscription carries the same keys.
            let oldStyle = try await sim.verifyJSON(subscription.transactionReceipt, bundle)
            #expect(oldStyle["receipt"]["in_app_ownership_type"].string == "PURCHASED")
            #expect(oldStyle["receipt"]["subscription_group_identifier"].string == groupId)
            #expect(oldStyle["latest_receipt_info"]["is_in_intro_offer_period"].string == "false")
        }
    }

    @Test func restoringASubscriptionGivesEachPaidPeriodANewTransaction() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.defineProduct(bundle, "levels", type: "non_consumable")
            try await sim.createUser("alice")
            let levels = try await sim.purchase("alice", bundle, "levels")
            let bought = try await sim.purchase("alice", bundle, "monthly")
            try await sim.advance(minutes: 11)  // two renewals: three periods

            let restored = try await sim.admin(.POST, "/admin/restores", ["userId": "alice", "bundleId": bundle])
            #expect(restored.status == 200)
            #expect(restored.json["transactions"].array?.count == 4, "the non-consumable and three periods")
            let answer = try await sim.verifyJSON(try #require(restored.json["receipt"].string), bundle)
            let monthly = try #require(answer["latest_receipt_info"].array).filter { $0["product_id"].string == "monthly" }
            #expect(monthly.count == 6)
            let byWebOrder = Dictionary(grouping: monthly) { $0["web_order_line_item_id"].string ?? "" }
            #expect(byWebOrder.count == 3)
            for (_, pair) in byWebOrder {
                #expect(pair.count == 2, "the period's payment and its restore")
                #expect(Set(pair.map { $0["transaction_id"].string ?? "" }).count == 2)
                #expect(pair.allSatisfy { $0["original_transaction_id"].string == bought.id })
                #expect(Set(pair.map { $0["purchase_date_ms"].string ?? "" }).count == 1)
                #expect(Set(pair.map { $0["expires_date_ms"].string ?? "" }).count == 1)
            }
            let levelsRestore = try #require(answer["receipt"]["in_app"].array?.first {
                $0["product_id"].string == "levels" && $0["transaction_id"].string != levels.id
            })
            #expect(levelsRestore["original_transaction_id"].string == levels.id)
            #expect(!levelsRestore["web_order_line_item_id"].isPresent)

            // The ledger's classifier tells the restores from the renewals by their shared web order.
            let receipt = try await sim.verifier().verify(
                ReceiptVerificationRequest(receiptData: try #require(restored.json["receipt"].string), sharedSecret: try await sim.sharedSecret(bundle)),
                logger: quietLogger
            )
            let catalog = ProductCatalog(products: [
                try Product(productId: "monthly", type: .autoRenewable, duration: ISODuration(parsing: "P1M")),
                try Product(productId: "levels", type: .nonConsumable),
            ])
            var state = UserLedger().classified(by: catalog)
            let decision = try UserDecisions.observeReceipt(receipt.appStoreAnswer, app: bundle, deviceId: "phone", digest: TestReceipts.digest, on: state)
            for (index, pending) in decision.events.enumerated() {
                state.apply(pending.event, version: Int64(index + 1), context: .init(position: Int64(index + 1), recordedAt: nil))
            }
            let kinds = state.transactionsInOrder.filter { $0.productId == "monthly" }.map(\.kind)
            #expect(kinds.filter { $0 == .restore }.count == 3)
            #expect(kinds.filter { $0 == .renewal }.count == 2)
            #expect(kinds.filter { $0 == .purchase }.count == 1)
        }
    }

    @Test func anUpgradeTakesEffectAtOnceAndCutsThePeriodShort() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "basic", type: "auto_renewable", duration: "P1M", options: ["group": "pro", "level": 2])
            try await sim.defineProduct(bundle, "premium", type: "auto_renewable", duration: "P1M", options: ["group": "pro", "level": 1])
            try await sim.createUser("alice")
            let basic = try await sim.purchase("alice", bundle, "basic")
            try await sim.advance(minutes: 2)
            let upgrade = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "premium"])
            #expect(upgrade.status == 201)
            #expect(upgrade.json["change"]["kind"].string == "upgrade")
            #expect(upgrade.json["change"]["isImmediate"].bool == true)
            let premiumId = try #require(upgrade.json["transaction"]["transactionId"].string)

            let answer = try await sim.verifyJSON(try #require(upgrade.json["receipt"].string), bundle)
            let latest = try #require(answer["latest_receipt_info"].array)
            let old = try #require(latest.first { $0["transaction_id"].string == basic.id })
            let new = try #require(latest.first { $0["transaction_id"].string == premiumId })
            #expect(old["is_upgraded"].string == "true")
            expectDateTriple(old, "cancellation_date")
            #expect(!old["cancellation_reason"].isPresent, "an upgrade is not a refund")
            #expect(old["cancellation_date_ms"].string == new["purchase_date_ms"].string, "the old period ends when the new one starts")
            #expect(new["original_transaction_id"].string == basic.id, "one original transaction id per group")
            #expect(new["product_id"].string == "premium")
            #expect(new["web_order_line_item_id"].string != old["web_order_line_item_id"].string)
            #expect(new["subscription_group_identifier"].string == old["subscription_group_identifier"].string)
            #expect(!new["is_upgraded"].isPresent && !new["cancellation_date"].isPresent)
            let newStart = try #require(new["purchase_date_ms"].int64)
            #expect(new["expires_date_ms"].int64 == newStart + month, "a full period of the new product")
            let pending = try #require(answer["pending_renewal_info"].array)
            #expect(pending.count == 1)
            #expect(pending.first?["product_id"].string == "premium")
            #expect(pending.first?["auto_renew_product_id"].string == "premium")

            try await sim.advance(minutes: 5)
            let renewed = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let renewal = try #require(renewed["latest_receipt_info"].array?.first)
            #expect(renewal["product_id"].string == "premium")
            #expect(renewal["purchase_date_ms"].int64 == newStart + month)
            #expect(renewal["original_transaction_id"].string == basic.id)
        }
    }

    @Test func downgradesAndCrossgradesOfAnotherDurationWaitForTheRenewal() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "premium", type: "auto_renewable", duration: "P1M", options: ["group": "pro", "level": 1])
            try await sim.defineProduct(bundle, "basic", type: "auto_renewable", duration: "P1M", options: ["group": "pro", "level": 2])
            try await sim.defineProduct(bundle, "basic.yearly", type: "auto_renewable", duration: "P1Y", options: ["group": "pro", "level": 2])
            try await sim.defineProduct(bundle, "basic.plus", type: "auto_renewable", duration: "P1Y", options: ["group": "pro", "level": 2])
            try await sim.createUser("alice")
            let premium = try await sim.purchase("alice", bundle, "premium")
            try await sim.advance(minutes: 1)

            let downgrade = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "basic"])
            #expect(downgrade.status == 202, "nothing is bought until the renewal")
            #expect(downgrade.json["change"]["kind"].string == "downgrade")
            #expect(downgrade.json["transaction"]["transactionId"].string == premium.id)
            var answer = try await sim.verifyJSON(try #require(downgrade.json["receipt"].string), bundle)
            #expect(answer["latest_receipt_info"].array?.count == 1)
            #expect(answer["pending_renewal_info"].array?.first?["product_id"].string == "premium")
            #expect(answer["pending_renewal_info"].array?.first?["auto_renew_product_id"].string == "basic")
            let premiumEnd = try #require(answer["latest_receipt_info"].array?.first?["expires_date_ms"].int64)

            try await sim.advance(minutes: 5)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let renewal = try #require(answer["latest_receipt_info"].array?.first)
            #expect(renewal["product_id"].string == "basic")
            #expect(renewal["purchase_date_ms"].int64 == premiumEnd)
            #expect(renewal["original_transaction_id"].string == premium.id)
            #expect(answer["pending_renewal_info"].array?.first?["product_id"].string == "basic")

            // Same level, other duration: a crossgrade at the next renewal.
            let crossgrade = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "basic.yearly"])
            #expect(crossgrade.status == 202)
            #expect(crossgrade.json["change"]["kind"].string == "crossgrade")
            try await sim.advance(minutes: 5)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let yearly = try #require(answer["latest_receipt_info"].array?.first)
            #expect(yearly["product_id"].string == "basic.yearly")
            let yearlyStart = try #require(yearly["purchase_date_ms"].int64)
            #expect(yearly["expires_date_ms"].int64 == yearlyStart + 60 * 60 * 1000, "a sandbox year")

            // Same level and duration: the App Store switches at once, as for an upgrade.
            let immediate = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "basic.plus"])
            #expect(immediate.status == 201)
            #expect(immediate.json["change"]["kind"].string == "crossgrade")
            #expect(immediate.json["change"]["isImmediate"].bool == true)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            #expect(answer["latest_receipt_info"].array?.first { $0["product_id"].string == "basic.yearly" }?["is_upgraded"].string == "true")
            #expect(answer["pending_renewal_info"].array?.count == 1)
        }
    }

    @Test func familyMembersGetTheOrganizersShareablePurchasesAsTheirOwn() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "levels", type: "non_consumable", options: ["familyShareable": true])
            try await sim.defineProduct(bundle, "skins", type: "non_consumable")
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.defineProduct(bundle, "family.monthly", type: "auto_renewable", duration: "P1M", options: ["familyShareable": true])
            try await sim.createUser("olivia")
            try await sim.createUser("max")
            let levels = try await sim.purchase("olivia", bundle, "levels")
            _ = try await sim.purchase("olivia", bundle, "skins")
            _ = try await sim.purchase("olivia", bundle, "coins")
            let monthly = try await sim.purchase("olivia", bundle, "family.monthly")
            try await sim.advance(minutes: 6)  // one renewal

            let linked = try await sim.admin(.POST, "/admin/family", ["organizerUserId": "olivia", "memberUserId": "max"])
            #expect(linked.status == 201)
            #expect(try await sim.admin(.POST, "/admin/family", ["organizerUserId": "olivia", "memberUserId": "max"]).status == 200)
            #expect(try await sim.admin(.POST, "/admin/family", ["organizerUserId": "max", "memberUserId": "max"]).status == 400)
            #expect(try await sim.admin(.POST, "/admin/family", ["organizerUserId": "max", "memberUserId": "olivia"]).status == 409)

            let organizer = try await sim.verifyJSON(try await sim.freshReceipt("olivia", bundle), bundle)
            let organizerEntries = try #require(organizer["latest_receipt_info"].array)
            #expect(organizerEntries.allSatisfy { $0["in_app_ownership_type"].string == "PURCHASED" })
            let organizerIds = Set(organizerEntries.compactMap { $0["transaction_id"].string })

            let member = try await sim.verifyJSON(try await sim.freshReceipt("max", bundle), bundle)
            let inApp = try #require(member["receipt"]["in_app"].array)
            #expect(inApp.map { $0["product_id"].string ?? "" }.sorted() == ["family.monthly", "family.monthly", "levels"])
            #expect(inApp.allSatisfy { $0["in_app_ownership_type"].string == "FAMILY_SHARED" })
            #expect(inApp.allSatisfy { !organizerIds.contains($0["transaction_id"].string ?? "") }, "the member's own transaction ids")
            let sharedLevels = try #require(inApp.first { $0["product_id"].string == "levels" })
            let boughtLevels = try #require(organizerEntries.first { $0["transaction_id"].string == levels.id })
            #expect(sharedLevels["purchase_date_ms"].string == boughtLevels["purchase_date_ms"].string)
            #expect(sharedLevels["original_transaction_id"].string == sharedLevels["transaction_id"].string)

            let sharedPeriods = inApp.filter { $0["product_id"].string == "family.monthly" }
                .sorted { ($0["purchase_date_ms"].int64 ?? 0) < ($1["purchase_date_ms"].int64 ?? 0) }
            let boughtPeriods = organizerEntries.filter { $0["original_transaction_id"].string == monthly.id }
                .sorted { ($0["purchase_date_ms"].int64 ?? 0) < ($1["purchase_date_ms"].int64 ?? 0) }
            #expect(sharedPeriods.map { $0["purchase_date_ms"].string } == boughtPeriods.map { $0["purchase_date_ms"].string })
            #expect(sharedPeriods.map { $0["expires_date_ms"].string } == boughtPeriods.map { $0["expires_date_ms"].string })
            let memberOriginal = try #require(sharedPeriods.first?["transaction_id"].string)
            #expect(sharedPeriods.allSatisfy { $0["original_transaction_id"].string == memberOriginal })
            #expect(member["pending_renewal_info"].array?.first?["original_transaction_id"].string == memberOriginal)
            #expect(member["pending_renewal_info"].array?.first?["auto_renew_status"].string == "1")

            // The next renewal reaches the member too, and a refund to the organizer shows on the copy.
            try await sim.advance(minutes: 5)
            _ = try await sim.admin(.POST, "/admin/transactions/\(levels.id)/cancel", ["reason": 0])
            let later = try await sim.verifyJSON(try await sim.freshReceipt("max", bundle), bundle)
            let laterEntries = try #require(later["latest_receipt_info"].array)
            #expect(laterEntries.filter { $0["product_id"].string == "family.monthly" }.count == 3)
            #expect(laterEntries.first { $0["product_id"].string == "levels" }?["cancellation_date_ms"].isPresent == true)
        }
    }

    @Test func familyCopiesFollowTheOrganizersSubscription() async throws {
        try await withSimulator { sim in
            let shared: [String: Any] = ["group": "family", "familyShareable": true]
            try await sim.defineProduct(bundle, "family.basic", type: "auto_renewable", duration: "P1M", options: shared.merging(["level": 2]) { $1 })
            try await sim.defineProduct(bundle, "family.plus", type: "auto_renewable", duration: "P1M", options: shared.merging(["level": 1]) { $1 })
            try await sim.createUser("olivia")
            try await sim.createUser("max")
            _ = try await sim.admin(.POST, "/admin/family", ["organizerUserId": "olivia", "memberUserId": "max"])
            let basic = try await sim.purchase("olivia", bundle, "family.basic")
            try await sim.advance(minutes: 1)
            _ = try await sim.purchase("olivia", bundle, "family.plus")

            let member = try await sim.verifyJSON(try await sim.freshReceipt("max", bundle), bundle)
            let periods = try #require(member["latest_receipt_info"].array)
            #expect(periods.count == 2)
            #expect(periods.first { $0["product_id"].string == "family.basic" }?["is_upgraded"].string == "true")
            #expect(periods.allSatisfy { $0["in_app_ownership_type"].string == "FAMILY_SHARED" })
            let memberOriginal = try #require(periods.first?["original_transaction_id"].string)
            #expect(memberOriginal != basic.id)
            #expect(member["pending_renewal_info"].array?.first?["product_id"].string == "family.plus")

            // The member's copy is read, not changed: billing and auto-renew belong to the buyer's.
            let status = try await sim.admin(.GET, "/admin/subscriptions/\(memberOriginal)")
            #expect(status.json["userId"].string == "max")
            #expect(status.json["productId"].string == "family.plus")
            #expect(try await sim.admin(.POST, "/admin/subscriptions/\(memberOriginal)/billing", ["failing": true]).status == 400)
            _ = try await sim.admin(.POST, "/admin/subscriptions/\(basic.id)/billing", ["failing": true])
            try await sim.advance(minutes: 6)
            let retrying = try await sim.verifyJSON(try await sim.freshReceipt("max", bundle), bundle)
            #expect(retrying["pending_renewal_info"].array?.first?["is_in_billing_retry_period"].string == "1")

            // A restore gives the member restores of the shared periods, still FAMILY_SHARED.
            let restored = try await sim.admin(.POST, "/admin/restores", ["userId": "max", "bundleId": bundle])
            let restores = try #require(restored.json["transactions"].array)
            #expect(restores.count == 2)
            #expect(restores.allSatisfy { $0["ownership"].string == "FAMILY_SHARED" && $0["originalTransactionId"].string == memberOriginal })
        }
    }

    @Test func introductoryOffersGoToTheFirstSubscriptionInAGroup() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "trial", type: "auto_renewable", duration: "P1M",
                                        options: ["group": "a", "introOffer": ["kind": "free_trial", "periods": 1]])
            try await sim.defineProduct(bundle, "trial.other", type: "auto_renewable", duration: "P1M", options: ["group": "a", "level": 1])
            try await sim.defineProduct(bundle, "payg", type: "auto_renewable", duration: "P1M",
                                        options: ["group": "b", "introOffer": ["kind": "pay_as_you_go", "periods": 2]])
            try await sim.defineProduct(bundle, "upfront", type: "auto_renewable", duration: "P1M",
                                        options: ["group": "c", "introOffer": ["kind": "pay_up_front", "periods": 3]])
            try await sim.createUser("alice")
            _ = try await sim.purchase("alice", bundle, "trial")
            _ = try await sim.purchase("alice", bundle, "payg")
            _ = try await sim.purchase("alice", bundle, "upfront")
            try await sim.advance(minutes: 16)  // three periods of payg and trial, and the end of upfront's offer

            let answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let latest = try #require(answer["latest_receipt_info"].array)
            func periods(_ product: String) -> [LenientJSON] {
                latest.filter { $0["product_id"].string == product }.sorted { ($0["purchase_date_ms"].int64 ?? 0) < ($1["purchase_date_ms"].int64 ?? 0) }
            }
            let trial = periods("trial")
            #expect(trial.map { $0["is_trial_period"].string } == ["true", "false", "false", "false"])
            #expect(trial.allSatisfy { $0["is_in_intro_offer_period"].string == "false" })
            let payg = periods("payg")
            #expect(payg.map { $0["is_in_intro_offer_period"].string } == ["true", "true", "false", "false"])
            #expect(payg.allSatisfy { $0["is_trial_period"].string == "false" })
            let upfront = periods("upfront")
            #expect(upfront.map { $0["is_in_intro_offer_period"].string } == ["true", "false"])
            let first = try #require(upfront.first)
            #expect((first["expires_date_ms"].int64 ?? 0) - (first["purchase_date_ms"].int64 ?? 0) == 3 * month, "one payment for three periods")

            // A second subscription in group a, after the first lapsed, starts without the trial.
            let original = try #require(trial.first?["original_transaction_id"].string)
            _ = try await sim.admin(.POST, "/admin/subscriptions/\(original)/auto-renew", ["enabled": false])
            try await sim.advance(minutes: 5)
            let again = try await sim.admin(.POST, "/admin/purchases", ["userId": "alice", "bundleId": bundle, "productId": "trial"])
            #expect(again.status == 201)
            #expect(again.json["transaction"]["isTrialPeriod"].bool == false)
            let fresh = try await sim.verifyJSON(try #require(again.json["receipt"].string), bundle)
            let newest = try #require(fresh["latest_receipt_info"].array?.first)
            #expect(newest["product_id"].string == "trial")
            #expect(newest["is_trial_period"].string == "false")
        }
    }

    @Test func refundsAreLabelledAsSimulatedProductionRefunds() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "levels", type: "non_consumable")
            try await sim.createUser("alice")
            let levels = try await sim.purchase("alice", bundle, "levels")
            let refund = try await sim.admin(.POST, "/admin/transactions/\(levels.id)/cancel", ["reason": 1])
            #expect(refund.status == 200)
            #expect(refund.json["simulatedRefund"].bool == true)
            #expect(refund.json["note"].string?.contains("sandbox never sends cancellation_date") == true)
            #expect(refund.json["transactionId"].string == levels.id, "the transaction's keys stay at the top")
            #expect(refund.json["cancellationReason"].int == 1)
            let answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let entry = try #require(answer["receipt"]["in_app"].array?.first)
            #expect(entry["cancellation_reason"].string == "1")
            expectDateTriple(entry, "cancellation_date")
        }
    }

    @Test func failingBillingPutsTheSubscriptionInBillingRetryWithAGracePeriod() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "monthly")
            let failing = try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/billing", ["failing": true, "gracePeriodDays": 16])
            #expect(failing.status == 200)
            #expect(failing.json["billingFailing"].bool == true)

            // Before the period ends nothing has failed yet.
            var answer = try await sim.verifyJSON(bought.receipt, bundle)
            var pending = try #require(answer["pending_renewal_info"].array?.first)
            #expect(!pending["is_in_billing_retry_period"].isPresent && !pending["grace_period_expires_date"].isPresent)
            let expires = try #require(answer["latest_receipt_info"].array?.first?["expires_date_ms"].int64)

            try await sim.advance(minutes: 12)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            #expect(answer["latest_receipt_info"].array?.count == 1, "no renewal while billing fails")
            pending = try #require(answer["pending_renewal_info"].array?.first)
            #expect(pending["is_in_billing_retry_period"].string == "1")
            #expect(pending["expiration_intent"].string == "2")
            #expect(pending["auto_renew_status"].string == "1")
            expectDateTriple(pending, "grace_period_expires_date")
            #expect(pending["grace_period_expires_date_ms"].int64 == expires + 16 * 86_400_000)

            let recovered = try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/billing", ["failing": false])
            let recoveredAt = try await sim.nowMs()
            let renewal = try #require(recovered.json["newTransactions"].array?.first)
            #expect(recovered.json["isActive"].bool == true)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let latest = try #require(answer["latest_receipt_info"].array?.first)
            #expect(latest["transaction_id"].string == renewal["transactionId"].string)
            let start = try #require(latest["purchase_date_ms"].int64)
            #expect(start >= expires + 7 * 60 * 1000 - 1_000 && start <= recoveredAt, "the next period starts at the recovery, 7 minutes after the lapse")
            #expect(latest["expires_date_ms"].int64 == start + month)
            pending = try #require(answer["pending_renewal_info"].array?.first)
            for key in ["is_in_billing_retry_period", "expiration_intent", "grace_period_expires_date"] {
                #expect(!pending[key].isPresent, "\(key) is gone once billing recovered")
            }

            // Without a grace period there is no grace date.
            _ = try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/billing", ["failing": true])
            try await sim.advance(minutes: 6)
            answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            pending = try #require(answer["pending_renewal_info"].array?.first)
            #expect(pending["is_in_billing_retry_period"].string == "1")
            #expect(!pending["grace_period_expires_date"].isPresent)
            #expect(try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/billing", ["failing": false, "gracePeriodDays": 3]).status == 400)
            #expect(try await sim.admin(.POST, "/admin/subscriptions/nope/billing", ["failing": true]).status == 404)
        }
    }

    @Test func turningAutoRenewOffLetsTheSubscriptionLapseWithIntentOne() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            let bought = try await sim.purchase("alice", bundle, "monthly")
            let off = try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/auto-renew", ["enabled": false])
            #expect(off.json["autoRenewStatus"].bool == false)
            var answer = try await sim.verifyJSON(bought.receipt, bundle)
            var pending = try #require(answer["pending_renewal_info"].array?.first)
            #expect(pending["auto_renew_status"].string == "0")
            #expect(!pending["expiration_intent"].isPresent, "still active")

            try await sim.advance(minutes: 6)
            answer = try await sim.verifyJSON(bought.receipt, bundle)
            #expect(answer["latest_receipt_info"].array?.count == 1)
            pending = try #require(answer["pending_renewal_info"].array?.first)
            #expect(pending["expiration_intent"].string == "1")
            #expect(pending["is_in_billing_retry_period"].string == "0")
            let late = try await sim.admin(.POST, "/admin/subscriptions/\(bought.id)/auto-renew", ["enabled": true])
            #expect(late.status == 409, "a lapsed subscription is bought again, not switched back on")

            // Switched back on before the period ends, it renews.
            try await sim.createUser("bob")
            let bobs = try await sim.purchase("bob", bundle, "monthly")
            _ = try await sim.admin(.POST, "/admin/subscriptions/\(bobs.id)/auto-renew", ["enabled": false])
            _ = try await sim.admin(.POST, "/admin/subscriptions/\(bobs.id)/auto-renew", ["enabled": true])
            try await sim.advance(minutes: 6)
            let status = try await sim.admin(.GET, "/admin/subscriptions/\(bobs.id)")
            #expect(status.json["isActive"].bool == true)
            #expect(status.json["autoRenewStatus"].bool == true)
            #expect(status.json["latestTransaction"]["transactionId"].string != bobs.id)
        }
    }

    @Test func finishedConsumablesLeaveLaterReceipts() async throws {
        try await withSimulator { sim in
            try await sim.defineProduct(bundle, "coins", type: "consumable")
            try await sim.defineProduct(bundle, "levels", type: "non_consumable")
            try await sim.defineProduct(bundle, "monthly", type: "auto_renewable", duration: "P1M")
            try await sim.createUser("alice")
            let first = try await sim.purchase("alice", bundle, "coins")
            let second = try await sim.purchase("alice", bundle, "coins")
            let levels = try await sim.purchase("alice", bundle, "levels")
            let monthly = try await sim.purchase("alice", bundle, "monthly")

            let finished = try await sim.admin(.POST, "/admin/transactions/\(first.id)/finish")
            #expect(finished.status == 200)
            #expect(finished.json["leavesReceipts"].bool == true)
            for kept in [levels.id, monthly.id] {
                #expect(try await sim.admin(.POST, "/admin/transactions/\(kept)/finish").json["leavesReceipts"].bool == false)
            }
            #expect(try await sim.admin(.POST, "/admin/transactions/nope/finish").status == 404)

            let answer = try await sim.verifyJSON(try await sim.freshReceipt("alice", bundle), bundle)
            let inApp = Set(try #require(answer["receipt"]["in_app"].array).compactMap { $0["transaction_id"].string })
            let latest = Set(try #require(answer["latest_receipt_info"].array).compactMap { $0["transaction_id"].string })
            #expect(inApp == [second.id, levels.id, monthly.id])
            #expect(latest == [second.id, levels.id, monthly.id])

            // A receipt issued before the finish still holds what it held.
            let older = try await sim.verifyJSON(monthly.receipt, bundle)
            #expect(older["receipt"]["in_app"].array?.contains { $0["transaction_id"].string == first.id } == true)
            #expect(older["latest_receipt_info"].array?.contains { $0["transaction_id"].string == first.id } == false)
        }
    }

    @Test func productOptionsAreRefusedWhereTheAppStoreHasNone() async throws {
        try await withSimulator { sim in
            let refused: [(String, [String: Any])] = [
                ("coins", ["type": "consumable", "group": "g"]),
                ("coins", ["type": "consumable", "familyShareable": true]),
                ("m", ["type": "auto_renewable", "duration": "P1M", "level": 1]),
                ("m", ["type": "auto_renewable", "duration": "P1M", "introOffer": ["kind": "free_trial", "periods": 0]]),
                ("m", ["type": "auto_renewable", "duration": "P1M", "introOffer": ["kind": "half_price", "periods": 1]]),
            ]
            for (id, body) in refused {
                let answer = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/\(id)", body)
                #expect(answer.status == 400, "\(body)")
            }
            let accepted = try await sim.admin(.PUT, "/admin/apps/\(bundle)/products/m", [
                "type": "auto_renewable", "duration": "P1M", "group": "g", "level": 2, "familyShareable": true,
                "introOffer": ["kind": "pay_up_front", "periods": 3],
            ])
            #expect(accepted.status == 200)
            #expect(accepted.json["level"].int == 2)
            #expect(accepted.json["introOffer"]["kind"].string == "pay_up_front")
            #expect(accepted.json["subscriptionGroupIdentifier"].string?.count == 8)
        }
    }
}

/// `key` (GMT text), `key_ms` and `key_pst` (Pacific text) are all there, and name the same second.
private func expectDateTriple(_ entry: LenientJSON, _ key: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let gmt = entry[key].string
    let pacific = entry[key + "_pst"].string
    #expect(gmt?.hasSuffix("Etc/GMT") == true, "\(key)", sourceLocation: sourceLocation)
    #expect(pacific?.hasSuffix("America/Los_Angeles") == true, "\(key)_pst", sourceLocation: sourceLocation)
    guard let ms = entry[key + "_ms"].int64 else {
        Issue.record("\(key)_ms is missing", sourceLocation: sourceLocation)
        return
    }
    for text in [gmt, pacific] {
        let date = text.flatMap(AppStoreDate.parse)
        #expect(date.map { abs($0.timeIntervalSince1970 * 1000 - Double(ms)) < 1000 } == true, "\(text ?? key) names \(key)_ms", sourceLocation: sourceLocation)
    }
}
