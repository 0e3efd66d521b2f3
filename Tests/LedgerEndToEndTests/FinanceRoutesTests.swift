import Foundation
import LedgerHTTP
import LedgerTesting
import NIOHTTP1
import Testing

@Suite struct FinanceRoutesTests {
    @Test func financeReadsTheAuditTrailAsJSONAndCSVWithTotalsAndCatalogGaps() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            // Sold by the App Store but never defined in the ledger's catalog.
            _ = try await api.simulator(.PUT, "/admin/apps/\(APIHarness.app)/products/gems.pack", ["type": "consumable"])
            let coins = try await api.buy("alice", "coins.100", quantity: 3)
            let first = try await api.ingest("alice", device: "phone, \"blue\"", receipt: coins.receipt, price: "0.99", currency: "USD")
            #expect(first.status == 200, "\(first.text)")
            let gems = try await api.buy("bob", "gems.pack")
            let second = try await api.ingest("bob", device: "tablet", receipt: gems.receipt)
            #expect(second.status == 200, "\(second.text)")
            let position = second.json["position"] as? Int ?? 0
            let finance = api.keys["finance"]

            let json = try await api.send(.GET, "/v1/audit/events?environment=sandbox&minPosition=\(position)", key: finance)
            let events = json.json["events"] as? [[String: Any]] ?? []
            #expect(events.count == 2, "\(json.text)")
            #expect(events.first?["amount"] as? String == "2.97")
            #expect(json.json["nextCursor"] is NSNull)

            let filtered = try await api.send(.GET, "/v1/audit/events?environment=sandbox&userId=bob&minPosition=\(position)", key: finance)
            #expect((filtered.json["events"] as? [[String: Any]])?.map { $0["userId"] as? String } == ["bob"])

            let csv = try await api.send(.GET, "/v1/audit/events?environment=sandbox&minPosition=\(position)", key: finance, headers: [("Accept", "text/csv")])
            #expect(csv.status == 200)
            #expect(csv.headers.first(name: "Content-Type")?.hasPrefix("text/csv") == true)
            let lines = csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            #expect(lines.count == 3, "a header row and one line per row: \(csv.text)")
            #expect(lines.first?.hasPrefix("position,occurred_at,") == true)
            #expect(csv.text.contains("\"phone, \"\"blue\"\"\""), "fields with commas and quotes are quoted, quotes doubled")
            #expect(csv.text.contains("gems.pack"))

            let summary = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&groupBy=product&minPosition=\(position)", key: finance)
            let rows = summary.json["rows"] as? [[String: Any]] ?? []
            let coinsRow = rows.first { $0["productId"] as? String == "coins.100" }
            #expect(coinsRow?["gross"] as? String == "2.97" && coinsRow?["units"] as? Int == 3, "\(summary.text)")
            #expect(rows.first { $0["productId"] as? String == "gems.pack" }?["unpriced"] as? Int == 1)

            let badGrouping = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&groupBy=planet", key: finance)
            #expect(badGrouping.status == 400 && badGrouping.errorCode == "invalid_request")
            let badRange = try await api.send(.GET, "/v1/audit/events?from=2026-02-01T00:00:00Z&to=2026-01-01T00:00:00Z", key: finance)
            #expect(badRange.status == 400)

            let unclassified = try await api.send(.GET, "/v1/audit/unclassified?minPosition=\(position)", key: finance)
            let products = unclassified.json["products"] as? [[String: Any]] ?? []
            #expect(products.map { $0["productId"] as? String } == ["gems.pack"], "\(unclassified.text)")
        }
    }

    /// The audit routes read production unless asked: sandbox (TestFlight, review) money is never
    /// revenue. Every purchase in this harness is the sandbox simulator's.
    @Test func theAuditRoutesReadProductionUnlessAskedAndNeverAddTheTwoTogether() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let coins = try await api.buy("carol", "coins.100", quantity: 2)
            let ingested = try await api.ingest("carol", device: "phone", receipt: coins.receipt, price: "0.99", currency: "USD")
            let position = ingested.json["position"] as? Int ?? 0
            let finance = api.keys["finance"]

            let events = try await api.send(.GET, "/v1/audit/events?minPosition=\(position)", key: finance)
            #expect(events.status == 200 && (events.json["events"] as? [Any])?.isEmpty == true, "\(events.text)")
            let summary = try await api.send(.GET, "/v1/audit/summary?minPosition=\(position)", key: finance)
            #expect((summary.json["rows"] as? [Any])?.isEmpty == true, "\(summary.text)")
            #expect(summary.json["environment"] as? String == "production")

            let sandbox = try await api.send(.GET, "/v1/audit/events?environment=sandbox&minPosition=\(position)", key: finance)
            #expect((sandbox.json["events"] as? [[String: Any]])?.map { $0["environment"] as? String } == ["sandbox"])

            let all = try await api.send(.GET, "/v1/audit/summary?environment=all&groupBy=currency&minPosition=\(position)", key: finance)
            let rows = all.json["rows"] as? [[String: Any]] ?? []
            #expect(rows.count == 1 && rows.first?["environment"] as? String == "sandbox" && rows.first?["gross"] as? String == "1.98", "\(all.text)")
            #expect((all.json["groupBy"] as? [String])?.contains("environment") == true)

            let wrong = try await api.send(.GET, "/v1/audit/events?environment=both", key: finance)
            #expect(wrong.status == 400 && wrong.errorCode == "invalid_request")
        }
    }

    /// The restores route lists the non-renewing periods the ledger delivered to new devices,
    /// pages them, exports them as CSV, and refuses filters that cannot apply to them; `currency`
    /// and `priced` narrow the events and the totals alike; `GET /v1/key` names the key's app.
    @Test func restoresOfNonRenewingPeriodsAndTheCurrencyAndPriceFilters() async throws {
        try await APIHarness.run { api in
            try await api.defineProduct("season.pass", type: "non_renewing", duration: "P1M")
            try await api.defineProduct("coins.100", type: "consumable", prices: [:])
            let finance = api.keys["finance"]
            var position = 0
            for user in ["dana", "eli"] {
                for _ in 0..<2 {
                    let pass = try await api.buy(user, "season.pass")
                    #expect(try await api.ingest(user, device: "phone", receipt: pass.receipt, price: "9.99", currency: "EUR").status == 200)
                }
                let restored = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/\(user)/devices/=tablet/restore", key: api.allKey)
                #expect(restored.status == 200, "\(restored.text)")
                position = restored.json["position"] as? Int ?? 0
            }
            let coins = try await api.buy("dana", "coins.100")
            let unpriced = try await api.ingest("dana", device: "phone", receipt: coins.receipt)
            position = max(position, unpriced.json["position"] as? Int ?? 0)

            let all = try await api.send(.GET, "/v1/audit/restores?environment=sandbox&minPosition=\(position)", key: finance)
            let restores = all.json["restores"] as? [[String: Any]] ?? []
            #expect(restores.count == 4, "two periods each to two users' tablets: \(all.text)")
            #expect(Set(restores.compactMap { $0["userId"] as? String }) == ["dana", "eli"])
            #expect(restores.allSatisfy { $0["deviceId"] as? String == "=tablet" && $0["productId"] as? String == "season.pass" && $0["environment"] as? String == "sandbox" })
            #expect((try await api.send(.GET, "/v1/audit/restores", key: finance).json["restores"] as? [Any])?.isEmpty == true, "production unless asked")

            // Pages of one, in order, end to end; the cursor is bound to the app.
            var paged: [Int] = []
            var cursor: String?
            repeat {
                let page = try await api.send(.GET, "/v1/audit/restores?environment=sandbox&limit=1" + (cursor.map { "&cursor=\($0)" } ?? ""), key: finance)
                paged += (page.json["restores"] as? [[String: Any]] ?? []).compactMap { $0["position"] as? Int }
                cursor = page.json["nextCursor"] as? String
            } while cursor != nil
            #expect(paged == restores.compactMap { $0["position"] as? Int })
            let eli = try await api.send(.GET, "/v1/audit/restores?environment=sandbox&userId=eli", key: finance)
            #expect((eli.json["restores"] as? [[String: Any]])?.count == 2)

            let csv = try await api.send(.GET, "/v1/audit/restores?environment=sandbox", key: finance, headers: [("Accept", "text/csv")])
            let lines = csv.text.components(separatedBy: "\r\n").filter { !$0.isEmpty }
            #expect(lines.first == "position,restored_at,environment,user_id,device_id,transaction_id,product_id")
            #expect(lines.count == 5 && lines.dropFirst().allSatisfy { $0.contains(",'=tablet,") }, "a device id starting with = is quoted against formulas: \(csv.text)")

            for bad in ["type=purchase", "currency=EUR", "priced=true", "cursor=nonsense", "limit=0"] {
                let refused = try await api.send(.GET, "/v1/audit/restores?\(bad)", key: finance)
                #expect(refused.status == 400 && refused.errorMessage?.isEmpty == false, "\(bad): \(refused.status) \(refused.text)")
            }

            // currency and priced select the same rows for events and totals.
            let euros = try await api.send(.GET, "/v1/audit/events?environment=sandbox&currency=EUR", key: finance).json["events"] as? [[String: Any]] ?? []
            #expect(euros.count == 4 && euros.allSatisfy { $0["currency"] as? String == "EUR" })
            let unpricedRows = try await api.send(.GET, "/v1/audit/events?environment=sandbox&priced=false", key: finance).json["events"] as? [[String: Any]] ?? []
            #expect(unpricedRows.map { $0["productId"] as? String } == ["coins.100"] && unpricedRows.first?["price"] is NSNull)
            let totals = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&currency=EUR", key: finance).json["rows"] as? [[String: Any]] ?? []
            #expect(totals.count == 1 && totals.first?["gross"] as? String == "39.96", "\(totals)")
            for bad in ["currency=eur", "currency=EURO", "priced=maybe"] {
                let refused = try await api.send(.GET, "/v1/audit/events?\(bad)", key: finance)
                #expect(refused.status == 400 && refused.errorMessage?.contains(bad.split(separator: "=")[1]) == true, "\(bad): \(refused.text)")
            }

            // productType narrows to the rows of one kind of product.
            let passes = try await api.send(.GET, "/v1/audit/events?environment=sandbox&productType=non_renewing", key: finance).json["events"] as? [[String: Any]] ?? []
            #expect(passes.count == 4 && passes.allSatisfy { $0["productId"] as? String == "season.pass" })
            let consumables = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&productType=consumable&groupBy=product", key: finance).json["rows"] as? [[String: Any]] ?? []
            #expect(consumables.map { $0["productId"] as? String } == ["coins.100"] && consumables.first?["unpriced"] as? Int == 1, "\(consumables)")
            let badType = try await api.send(.GET, "/v1/audit/events?productType=subscription", key: finance)
            #expect(badType.status == 400 && badType.errorMessage?.contains("non_renewing") == true, "\(badType.text)")
            #expect(try await api.send(.GET, "/v1/audit/restores?productType=non_renewing", key: finance).status == 400)

            let me = try await api.send(.GET, "/v1/key", key: finance)
            #expect(me.json["app"] as? String == APIHarness.app && me.json["scopes"] as? [String] == ["finance"], "\(me.text)")
        }
    }
}
