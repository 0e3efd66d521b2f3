import AppStore
import LedgerDemo
import LedgerProjections
import LedgerStore
import LedgerRuntime
import LedgerTesting
import NIOHTTP1
import Testing

/// The stories `ledger demo` tells, each through HTTP against the simulator and a real PostgreSQL.
@Suite struct DemoStoryTests {
    /// Runs `body` with the demo's catalog defined in the harness's simulator and ledger.
    private func withStories<T: Sendable>(_ name: String = #function, _ body: @Sendable (DemoStories) async throws -> T) async throws -> T {
        try await APIHarness.run(name) { api in
            let client = DemoClient(ledgerBase: api.base, apiKey: api.allKey, simulatorBase: api.simulatorBase, bundleId: APIHarness.app)
            let stories = DemoStories(client: client)
            try await stories.defineCatalog()
            return try await body(stories)
        }
    }

    @Test func theAppsServerFollowsTheFeedAndReceivesSignedWebhooksOfARenewalWithNoDeviceAndARefund() async throws {
        let appServer = DemoAppServer()
        let port = ServerPort()
        let receiver = appServer.application(logger: APIHarness.logger) { base in port.report(Int(base.split(separator: ":").last ?? "") ?? 0) }
        try await withRunningServices([receiver], logger: APIHarness.logger) {
            let base = "http://127.0.0.1:\(try await port.value())"
            try await APIHarness.run(followChanges: true) { api in
                let client = DemoClient(ledgerBase: api.base, apiKey: api.allKey, simulatorBase: api.simulatorBase, bundleId: APIHarness.app)
                let stories = DemoStories(client: client, appServer: appServer, appServerBase: base)
                try await stories.defineCatalog()
                let result = try await stories.following()
                #expect(result["feed"]?.answer["changes"]?.array.compactMap(\.string) == ["purchase", "renewal", "refund"])
                #expect(result["webhooks"]?.answer["webhooks"]?.array.compactMap(\.string) == ["purchase", "renewal", "refund"])
                let unverified = appServer.webhooks.filter { !$0.signatureVerified }
                #expect(unverified.isEmpty)
                let deliveries = result["deliveries"]?.answer
                #expect(deliveries != nil)
            }
        }
    }

    private func kinds(_ step: DemoStep?) -> [String] {
        (step?.answer["recorded"]?.array ?? []).compactMap { $0["kind"]?.string }
    }

    @Test func aConsumableIsBoughtPartlyUsedAndAnOverdrawIsRefusedWithTheBalance() async throws {
        let result = try await withStories { try await $0.consumable() }
        #expect(kinds(result["ingest"]) == ["receipt", "purchase"])
        #expect(result["consume"]?.answer["balance"]?.int == 2)
        let overdraw = try #require(result["overdraw"])
        #expect(overdraw.status == 409)
        #expect(overdraw.answer["error"]?["code"]?.string == "insufficient_balance")
        #expect(overdraw.answer["error"]?["balance"]?.int == 2)
        let coins = try #require(result.balances["balances"]?[0])
        #expect(coins["purchased"]?.int == 5)
        #expect(coins["consumed"]?.int == 3)
        #expect(coins["balance"]?.int == 2)
        #expect(result.entitlements["consumables"]?[0]?["balance"]?.int == 2)
    }

    @Test func aNonConsumableBoughtAgainIsARestoreNotASecondPurchaseAndRestoresToASecondDevice() async throws {
        let result = try await withStories { try await $0.nonConsumable() }
        let original = try #require(result["buy"]?.answer["transaction"]?["transactionId"]?.string)
        let again = try #require(result["buy-again"]?.answer["transaction"])
        #expect(again["originalTransactionId"]?.string == original)
        #expect(again["transactionId"]?.string != original)

        #expect(kinds(result["ingest"]) == ["receipt", "purchase"])
        #expect(kinds(result["ingest-again"]) == ["receipt", "restore"])
        let duplicates = (result["ingest-again"]?.answer["duplicates"]?.array ?? []).compactMap { $0["transactionId"]?.string }
        #expect(duplicates == [original])

        let rows = result["audit"]?.answer["events"]?.array ?? []
        #expect(rows.filter { $0["event"]?.string == "purchase" }.map { $0["transactionId"]?.string } == [original])

        let restored = try #require(result["restore-device"])
        #expect(restored.answer["deviceId"]?.string == "tablet")
        let ownedOnTablet = (restored.answer["entitlements"]?["owned"]?.array ?? []).compactMap { $0["productId"]?.string }
        #expect(ownedOnTablet == [DemoStories.Product.levelPack])
        let owned = result.entitlements["owned"]?.array ?? []
        #expect(owned.count == 1)
        #expect(owned.first?["originalTransactionId"]?.string == original)
    }

    @Test func aNonRenewingSubscriptionBoughtTwiceStacksItsPeriodsAndRestoresBothToANewDevice() async throws {
        let result = try await withStories { try await $0.nonRenewing() }
        let first = try #require(result["buy"]?.answer["transaction"]?["transactionId"]?.string)
        let second = try #require(result["buy-again"]?.answer["transaction"]?["transactionId"]?.string)
        let periods = (result["periods"]?.answer["periods"]?.array ?? []).sorted { ($0["start"]?.string ?? "") < ($1["start"]?.string ?? "") }
        try #require(periods.count == 2)
        #expect(periods.map { $0["transactionId"]?.string } == [first, second])
        #expect(periods[1]["start"]?.string == periods[0]["end"]?.string)
        #expect(periods[0]["end"]?.string != periods[0]["start"]?.string)

        let restored = try #require(result["restore-device"])
        #expect(restored.answer["deviceId"]?.string == "laptop")
        #expect(Set((restored.answer["restoredTransactionIds"]?.array ?? []).compactMap(\.string)) == [first, second])

        let pass = try #require(result.entitlements["subscriptions"]?[0])
        #expect(pass["productId"]?.string == DemoStories.Product.seasonPass)
        #expect(pass["active"]?.bool == true)
        #expect(pass["activeUntil"]?.string == periods[1]["end"]?.string)
    }

    @Test func aRefundRecordedFromTheNextReceiptRemovesWhatThePurchaseGave() async throws {
        let result = try await withStories { try await $0.refund() }
        let transaction = try #require(result["buy"]?.answer["transaction"]?["transactionId"]?.string)
        let ownedBefore = (result["ingest"]?.answer["entitlements"]?["owned"]?.array ?? []).compactMap { $0["productId"]?.string }
        #expect(ownedBefore == [DemoStories.Product.noAds])

        let revocations = (result["ingest-refund"]?.answer["recorded"]?.array ?? []).filter { $0["kind"]?.string == "refund" }
        #expect(revocations.map { $0["transactionId"]?.string } == [transaction])
        #expect(result["entitlements"]?.answer["owned"]?.array.isEmpty == true)
        #expect(result.entitlements["owned"]?.array.isEmpty == true)

        let rows = result["audit"]?.answer["events"]?.array ?? []
        #expect(rows.map { $0["event"]?.string } == ["purchase", "refund"])
        #expect(rows.allSatisfy { $0["revoked"]?.bool == true && $0["transactionId"]?.string == transaction })
    }

    @Test func anAutoRenewableRenewsOnTheSandboxClockThenLapsesAfterTheLastRenewal() async throws {
        let result = try await withStories { try await $0.autoRenewable() }
        // Each post is recorded with what it brought: the purchase with Apple's renewal info, then the renewals.
        #expect(kinds(result["ingest"]) == ["receipt", "purchase", "renewal_info"])
        #expect(kinds(result["ingest-renewal"]) == ["receipt", "renewal"])
        let active = try #require(result["active"]?.answer["subscriptions"]?[0])
        #expect(active["active"]?.bool == true)

        // The sandbox renews 6 times; the first was recorded already.
        // The receipt after the last renewal also says auto-renew ended.
        #expect(kinds(result["ingest-lapsed"]) == ["receipt"] + Array(repeating: "renewal", count: 5) + ["renewal_info"])
        let lapsed = try #require(result["lapsed"]?.answer["subscriptions"]?[0])
        #expect(lapsed["active"]?.bool == false)
        #expect(lapsed["activeUntil"] == nil || lapsed["activeUntil"] == .null)

        let periods = (result.periods["periods"]?.array ?? []).filter { $0["kind"]?.string == "auto_renewable" }
        #expect(periods.count == 7)
        #expect(periods.allSatisfy { $0["active"]?.bool == false })
    }

    @Test func theStoreKit2StoryRecordsASignedPurchaseAndTheRenewalAndRefundApplesNotificationsBring() async throws {
        let result = try await withStories { try await $0.storeKit2() }
        #expect(kinds(result["post-signed"]).contains("purchase"), "\(String(describing: result["post-signed"]?.answer))")
        #expect(result["did-renew"]?.answer["outcome"]?.string == "recorded")
        #expect(kinds(result["did-renew"]) == ["notification", "renewal", "renewal_info"])
        #expect(kinds(result["refund"]) == ["notification", "refund", "renewal_info"], "the refund, and auto-renew stopped")
        let rows = result["audit"]?.answer["events"]?.array ?? []
        #expect(rows.map { $0["event"]?.string } == ["purchase", "renewal", "refund"], "\(rows)")
        #expect(rows.filter { $0["event"]?.string != "refund" }.allSatisfy { $0["priceSource"]?.string == "app_store" && $0["price"]?.string == "4.99" })
        // Refunded, the renewal gives nothing: no active subscription is left.
        #expect(result.entitlements["subscriptions"]?.array.contains { $0["active"]?.bool == true } == false, "\(result.entitlements)")
    }

    @Test func theWholeDemoRunsStoryAfterStoryOnOneLedger() async throws {
        // As `ledger demo` runs them: with the app's server, so the following story comes after
        // the StoreKit 2 story's notifications, which it must tell from its own.
        let appServer = DemoAppServer()
        let port = ServerPort()
        let receiver = appServer.application(logger: APIHarness.logger) { base in port.report(Int(base.split(separator: ":").last ?? "") ?? 0) }
        let results = try await withRunningServices([receiver], logger: APIHarness.logger) {
            let base = "http://127.0.0.1:\(try await port.value())"
            return try await APIHarness.run(followChanges: true) { api in
                let client = DemoClient(ledgerBase: api.base, apiKey: api.allKey, simulatorBase: api.simulatorBase, bundleId: APIHarness.app)
                return try await DemoStories(client: client, appServer: appServer, appServerBase: base).runAll()
            }
        }
        #expect(results.map(\.story) == ["consumable", "non-consumable", "non-renewing", "refund", "storekit2", "following", "auto-renewable",
                                         "restored-subscription"])
        #expect(results.allSatisfy { $0.entitlements["userId"]?.string == $0.userId })
    }
}

/// The replay story: a fold with a classification bug is live, the fixed version's dry run names
/// exactly the finance rows the fix changes, and the rebuild switches over to the right answers.
@Suite struct ReplayStoryTests {
    @Test func aFixedClassificationRuleReplayedChangesExactlyTheRowsItShould() async throws {
        try await APIHarness.run { api in try await Self.replay(api) }
    }

    static func replay(_ api: APIHarness) async throws {
        let client = DemoClient(ledgerBase: api.base, apiKey: api.allKey, simulatorBase: api.simulatorBase, bundleId: APIHarness.app)
        let stories = DemoStories(client: client)
        try await stories.defineCatalog()
        let restored = try await stories.restoredSubscription()

        // The live ledger already books one purchase and one renewal: the restores are no money.
        let audit = restored["audit"]?.answer["events"]?.array ?? []
        #expect(audit.map { $0["event"]?.string } == ["purchase", "renewal"], "\(audit)")
        let paid = Set(audit.compactMap { $0["transactionId"]?.string })
        let restores = Set((restored["restore"]?.answer["transactions"]?.array ?? []).compactMap { $0["transactionId"]?.string })
            .subtracting(paid)
        #expect(restores.count == 2, "the App Store listed both periods again under new ids")

        let secret = try await api.simulator(.GET, "/admin/apps/\(APIHarness.app)").json["sharedSecret"] as? String
        let verifier = AppStoreReceiptVerifier(configuration: AppStoreConfiguration(
            productionURL: api.simulatorBase + "/production/verifyReceipt", sandboxURL: api.simulatorBase + "/sandbox/verifyReceipt"
        ))
        let roles = DatabaseRoles(runtime: api.settings, owner: try await TestDatabase.ownerSettings(for: api.settings))
        let replay = try await ReplayStory(server: roles, verifier: verifier, sharedSecret: secret, bundleId: APIHarness.app,
                                           logger: APIHarness.logger).run(replaying: restored)

        // With the bug, each restored period was another paid renewal.
        #expect(replay.rowsBefore.filter { $0.event == "renewal" }.count == 3)
        #expect(replay.liveVersionBefore == AuditTrailProjection.version - 1)
        // The dry run names exactly those two rows, as removed, with their transactions; of the two paid
        // periods, only the judgement of their service changes (a stretch no longer holding the restores).
        let removed = replay.differences.filter { $0.change == .removed }
        #expect(removed.count == 2 && replay.differences.allSatisfy { $0.user == restored.userId })
        #expect(Set(removed.compactMap { ($0.before?["transaction_id"]) ?? nil }) == restores)
        #expect(removed.allSatisfy { ($0.before?["event"] ?? nil) == "renewal" && ($0.before?["price"] ?? nil) == "4.99" })
        let changed = replay.differences.filter { $0.change == .changed }
        #expect(Set(changed.compactMap { ($0.before?["transaction_id"]) ?? nil }) == paid)
        for difference in changed {
            let fields = Set((difference.before ?? [:]).keys.filter { difference.before?[$0] != difference.after?[$0] })
            #expect(fields.isSubset(of: ["service", "current_until", "service_ends"]), "\(fields)")
        }
        #expect(replay.differences.allSatisfy { $0.lines.first?.contains("transaction ") == true })
        // Switched over: the view reads the fixed version, with one payment per period.
        #expect(replay.liveVersionAfter == AuditTrailProjection.version)
        #expect(replay.rowsAfter.map(\.event) == ["purchase", "renewal"])
        #expect(Set(replay.rowsAfter.map(\.transactionId)) == paid)
    }
}
