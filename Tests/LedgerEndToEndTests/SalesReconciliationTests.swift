import AppStore
import AppStoreSimulator
import Crypto
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// Finance checks the ledger against Apple's own books: the production simulator writes Apple's
/// Summary Sales Report of its sales; imported, it is reconciled with the ledger's audit trail,
/// and every difference is one the test made on purpose, explained.
@Suite struct SalesReconciliationTests {
    static let app = APIHarness.app
    static var webhookPath: String { "/v1/apps/\(app)/notifications" }

    @Test func salesInSeveralCountriesReconcileAndWhatTheLedgerMissedIsNamedUntilRecovered() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APIHarness.run(productionSimulator: true, authority: authority) { api in
            try await Self.defineCatalog(api)
            try await api.defineProduct("pro.yearly", type: "auto_renewable", duration: "P1Y", group: "pro", prices: ["USD": "49.99"],
                                        simulatorOptions: ["price": "49.99", "currency": "USD", "group": "pro", "level": 1])
            _ = try await api.productionSimulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + Self.webhookPath])
            try await api.giveServerAPIKey()

            // Devices post what they bought, in three countries; Apple refunds one purchase.
            for (user, storefront) in [("ann", "USA"), ("bea", "FRA"), ("kei", "JPN"), ("zed", "USA"), ("org", "USA"), ("kid", "USA"), ("tia", "USA")] {
                _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": user, "storefront": storefront])
            }
            var bought: [String: String] = [:]
            _ = try await api.productionSimulator(.POST, "/admin/family", ["organizerUserId": "org", "memberUserId": "kid"])
            // An upgrade (monthly to yearly, at once), a free trial, a family purchase shared with a member.
            for (user, product, quantity) in [("ann", "coins", 3), ("bea", "coins", 2), ("kei", "coins", 1), ("ann", "pro.monthly", 1),
                                              ("bea", "pro.monthly", 1), ("ann", "pro.yearly", 1), ("tia", "plus.monthly", 1), ("org", "levels", 1)] {
                let purchase = try await Self.purchase(api, user, product, quantity: quantity)
                bought["\(user)/\(product)"] = purchase.transactionId
                let posted = try await api.postTransaction(user, device: "\(user)-phone", purchase.jws)
                #expect(posted.status == 200, "\(posted.text)")
            }
            let shared = try await api.productionSimulator(.GET, "/admin/users/kid/apps/\(Self.app)").json["signedTransactions"] as? [String] ?? []
            #expect(shared.count == 1, "the member's copy of the family's levels")
            for jws in shared { #expect(try await api.postTransaction("kid", device: "kid-phone", jws).status == 200) }
            _ = try await api.productionSimulator(.POST, "/admin/transactions/\(bought["kei/coins"]!)/cancel", ["reason": 1])
            try await Self.waitForDeliveries(api)
            // A sandbox purchase: in the ledger, never in Apple's reports.
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "tess"])
            let sandbox = try await api.simulator(.POST, "/admin/purchases", ["userId": "tess", "bundleId": Self.app, "productId": "coins", "quantity": 5])
            let sandboxJWS = try #require(sandbox.json["signedTransaction"] as? String)
            let sandboxPosted = try await api.postTransaction("tess", device: "tess-phone", sandboxJWS)
            #expect(sandboxPosted.status == 200, "\(sandboxPosted.text)")

            let day = try await Self.reportingDay(api)
            let ledger = api.appStoreLedger()
            let first = try await Self.importReport(api, ledger, day: day)
            #expect(first.kind == .recorded && first.lines == 8, "coins in 3 countries and a refund, pro in 2, the upgrade, the family's levels: \(first)")
            try await Self.waitForAuditTrail(api)

            let clean = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: day, to: day)
            #expect(clean.rows.allSatisfy { $0.status == .matched || ($0.productId == "plus.monthly" && $0.status == .explained) },
                    "\(clean.rows.filter { $0.status != .matched })")
            let trial = try #require(clean.rows.first { $0.productId == "plus.monthly" })
            #expect(trial.explanations.map(\.code) == [.freeUnits] && trial.ledgerProceeds == "0" && trial.proceedsSource == .free, "\(trial)")
            #expect(clean.sandboxUnits == 5 && clean.days.map(\.report) == [first.contentHash])
            let frenchCoins = try #require(clean.rows.first { $0.productId == "coins" && $0.country == "FR" })
            #expect(frenchCoins.currency == "EUR" && frenchCoins.price == "1.09" && frenchCoins.apple.unitsSold == 2 && frenchCoins.ledger.unitsSold == 2)
            #expect(frenchCoins.apple.amountSold == "2.18" && frenchCoins.ledger.amountSold == "2.18" && frenchCoins.appleProceeds == "1.52")
            for row in clean.rows where row.status == .matched {
                #expect(row.proceedsSource == .appleReport && row.ledgerProceeds == row.appleProceeds && row.ledgerProceedsCurrency == row.proceedsCurrency,
                        "where Apple's report covers a row, the ledger's proceeds are Apple's: \(row)")
            }
            let japan = try #require(clean.rows.first { $0.productId == "coins" && $0.country == "JP" })
            #expect(japan.apple.unitsSold == 1 && japan.apple.unitsRefunded == 1 && japan.ledger.unitsRefunded == 1 && japan.apple.amountRefunded == "160")

            // The same file again records nothing.
            let again = try await Self.importReport(api, ledger, day: day)
            #expect(again.kind == .duplicate && again.position == first.position)

            // The ledger is deaf: three sales no device posts and whose notifications never come,
            // and a refund of a purchase it holds.
            _ = try await api.productionSimulator(.PUT, "/admin/apps/\(Self.app)/notifications/dropped", ["dropped": true])
            for quantity in [1, 2] { _ = try await Self.purchase(api, "zed", "coins", quantity: quantity) }
            _ = try await api.productionSimulator(.POST, "/admin/transactions/\(bought["ann/coins"]!)/cancel", ["reason": 0])
            let corrected = try await Self.importReport(api, ledger, day: day)
            #expect(corrected.kind == .superseding && corrected.supersedes == first.contentHash, "\(corrected)")

            let gap = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: day, to: day)
            let differing = gap.rows.filter { $0.status == .differs }
            let codes = differing.flatMap(\.explanations).map { "\($0.code.rawValue):\($0.units)" }.sorted()
            #expect(codes == ["not_in_ledger:3", "refund_not_in_ledger:3"], "\(differing)")
            let usCoins = try #require(differing.first { $0.productId == "coins" && $0.country == "US" })
            #expect(usCoins.appleProceeds == "2.07" && usCoins.ledgerProceeds == "2.07" && usCoins.proceedsSource == .appleReport,
                    "Apple: 6 sold and 3 refunded at 0.69 a unit; the ledger: its 3 sold at Apple's 0.69: \(usCoins)")
            #expect(usCoins.apple.unitsSold == 6 && usCoins.ledger.unitsSold == 3 && usCoins.apple.unitsRefunded == 3 && usCoins.ledger.unitsRefunded == 0)
            #expect(usCoins.transactions == [bought["ann/coins"]!], "the drill-down names the ledger's transactions of the row")
            #expect(gap.days.first?.differing == 1 && gap.days.first?.report == corrected.contentHash)

            // Apple's notification history brings the refund back; the sales Apple alone knows remain.
            let sync = try #require(ledger.syncNotifications)
            _ = try await sync(app: Self.app, environment: .production)
            try await Self.waitForAuditTrail(api)
            let after = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: day, to: day)
            let left = after.rows.filter { $0.status == .differs }.flatMap(\.explanations).map { "\($0.code.rawValue):\($0.units)" }
            #expect(left == ["not_in_ledger:3"], "\(after.rows.filter { $0.status != .matched })")

            // Finance reads it over HTTP, as JSON and CSV; a bad period is refused with what was wrong.
            let json = try await api.send(.GET, "/v1/audit/reconciliation?from=\(day)&to=\(day)", key: api.keys["finance"])
            #expect(json.status == 200 && (json.json["rows"] as? [[String: Any]])?.count == after.rows.count, "\(json.text)")
            let csv = try await api.send(.GET, "/v1/audit/reconciliation?from=\(day)&to=\(day)", key: api.keys["finance"], headers: [("Accept", "text/csv")])
            #expect(csv.status == 200 && csv.text.hasPrefix("day,product_id,country,currency,price,apple_units_sold"))
            #expect(csv.text.contains("not_in_ledger: 3 sale(s) Apple reports"))
            let reversed = try await api.send(.GET, "/v1/audit/reconciliation?from=\(day)&to=2001-01-01", key: api.keys["finance"])
            #expect(reversed.status == 400 && reversed.text.contains("is after to"), "\(reversed.text)")
            let readKey = try await api.send(.GET, "/v1/audit/reconciliation?from=\(day)&to=\(day)", key: api.keys["read"])
            #expect(readKey.status == 403)
        }
    }

    @Test func aMonthOfSalesReconcilesDayByDayAndTheLedgersProceedsAreApplesPerRow() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APIHarness.run(productionSimulator: true, authority: authority) { api in
            try await Self.defineCatalog(api)
            _ = try await api.productionSimulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + Self.webhookPath])
            try await api.giveServerAPIKey()
            for (user, storefront) in [("ann", "USA"), ("bea", "FRA"), ("kei", "JPN"), ("org", "USA"), ("kid", "USA"), ("tia", "USA")] {
                _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": user, "storefront": storefront])
            }
            _ = try await api.productionSimulator(.POST, "/admin/family", ["organizerUserId": "org", "memberUserId": "kid"])
            // Day by day for a month and a day: purchases posted by devices, a refund, a family purchase shared with a member;
            // subscriptions (one from a free trial) renew through Apple's notifications alone.
            let plan: [Int: [(String, String, Int)]] = [
                0: [("ann", "coins", 3), ("bea", "pro.monthly", 1), ("tia", "plus.monthly", 1), ("org", "levels", 1)],
                4: [("bea", "coins", 2)], 9: [("kei", "coins", 1)], 15: [("ann", "pro.monthly", 1)], 22: [("kei", "coins", 2), ("ann", "coins", 1)],
            ]
            var days: Set<String> = []
            var refunded = ""
            for day in 0...31 {
                for (user, product, quantity) in plan[day] ?? [] {
                    let purchase = try await Self.purchase(api, user, product, quantity: quantity)
                    if day == 9 { refunded = purchase.transactionId }
                    #expect(try await api.postTransaction(user, device: "\(user)-phone", purchase.jws).status == 200)
                }
                if day == 0 {
                    let shared = try await api.productionSimulator(.GET, "/admin/users/kid/apps/\(Self.app)").json["signedTransactions"] as? [String] ?? []
                    for jws in shared { #expect(try await api.postTransaction("kid", device: "kid-phone", jws).status == 200) }
                }
                if day == 12 { _ = try await api.productionSimulator(.POST, "/admin/transactions/\(refunded)/cancel", ["reason": 1]) }
                days.insert(try await Self.simulatorReportingDay(api))
                _ = try await api.productionSimulator(.POST, "/admin/clock/advance", ["seconds": 86_400])
            }
            try await Self.waitForDeliveries(api)
            let ledger = api.appStoreLedger()
            var imported = 0
            for day in days.sorted() {
                let answer = try await api.productionSimulator(.GET, "/admin/apps/\(Self.app)/sales-reports/\(day)")
                guard answer.status == 200 else { continue }
                _ = try await Self.importReport(api, ledger, day: day)
                imported += 1
            }
            #expect(imported == days.count, "a report of every day, with or without sales")
            try await Self.waitForAuditTrail(api)

            let month = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: days.min()!, to: days.max()!)
            let open = month.rows.filter { $0.status == .differs }
            #expect(open.isEmpty, "\(open)")
            #expect(month.rows.allSatisfy { $0.status == .matched || $0.explanations.allSatisfy { $0.code == .freeUnits } }, "\(month.rows.filter { $0.status != .matched })")
            let renewals = month.rows.filter { $0.productId.hasSuffix(".monthly") && $0.apple.unitsSold > 0 }
            #expect(Set(renewals.map(\.day)).count >= 3, "first purchases and the renewals a month later, on their own days: \(renewals.map(\.day))")
            #expect(month.rows.contains { $0.apple.unitsRefunded == 1 && $0.ledger.unitsRefunded == 1 }, "the refund, on the day Apple booked it")
            for row in month.rows where row.status == .matched && row.apple.unitsSold + row.apple.unitsRefunded > 0 {
                #expect(row.ledgerProceeds == row.appleProceeds && row.proceedsSource == .appleReport, "per row, the ledger's proceeds are Apple's: \(row)")
            }
            // And on the audit trail's own rows: each production money row's proceeds are Apple's per-unit proceeds × its units.
            let events = try await api.send(.GET, "/v1/audit/events?limit=500", key: api.keys["finance"]).json["events"] as? [[String: Any]] ?? []
            let paid = events.filter { ($0["amount"] as? String).flatMap { Decimal(string: $0) }.map { $0 > 0 } ?? false }
            #expect(!paid.isEmpty && paid.allSatisfy { $0["proceedsSource"] as? String == "apple_report" }, "\(paid.filter { $0["proceedsSource"] as? String != "apple_report" })")

            // The next day the ledger goes deaf: three coins sold that no device posts and no notification tells,
            // and Apple refunds ann's first purchase of the month. The month's reconciliation names exactly those.
            _ = try await api.productionSimulator(.PUT, "/admin/apps/\(Self.app)/notifications/dropped", ["dropped": true])
            for quantity in [1, 2] { _ = try await Self.purchase(api, "kei", "coins", quantity: quantity) }
            let annFirst = try #require(events.first { $0["userId"] as? String == "ann" && $0["productId"] as? String == "coins" }?["transactionId"] as? String)
            _ = try await api.productionSimulator(.POST, "/admin/transactions/\(annFirst)/cancel", ["reason": 0])
            let today = try await Self.simulatorReportingDay(api)
            _ = try await Self.importReport(api, ledger, day: today)
            let gap = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: days.min()!, to: today)
            let codes = gap.rows.filter { $0.status == .differs }.flatMap(\.explanations).map { "\($0.code.rawValue):\($0.units)" }.sorted()
            #expect(codes == ["not_in_ledger:3", "refund_not_in_ledger:3"], "\(gap.rows.filter { $0.status == .differs })")
            // Apple's notification history brings the refund back; the sales Apple alone knows remain, to backfill.
            let sync = try #require(ledger.syncNotifications)
            _ = try await sync(app: Self.app, environment: .production)
            try await Self.waitForAuditTrail(api)
            let after = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: days.min()!, to: today)
            let left = after.rows.filter { $0.status == .differs }.flatMap(\.explanations).map { "\($0.code.rawValue):\($0.units)" }
            #expect(left == ["not_in_ledger:3"], "\(after.rows.filter { $0.status == .differs })")
        }
    }

    /// Today in Apple's reporting time zone, by the production simulator's clock.
    static func simulatorReportingDay(_ api: APIHarness) async throws -> String {
        let clock = try await api.productionSimulator(.GET, "/admin/clock")
        guard let ms = clock.json["nowMs"] as? Int else { throw HarnessError(message: "no clock: \(clock.text)") }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: ReconcileSalesReports.defaultTimeZone)!
        let parts = calendar.dateComponents([.year, .month, .day], from: Date(timeIntervalSince1970: Double(ms) / 1000))
        return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
    }

    @Test func everyAuditRowCarriesItsProceedsFromApplesReportOrANamedEstimateAndTheSummaryAddsThemPerCurrency() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APIHarness.run(productionSimulator: true, authority: authority) { api in
            let prices: [String: Any] = ["price": "0.99", "currency": "USD",
                                         "storefrontPrices": ["FRA": ["price": "1.09", "currency": "EUR"], "JPN": ["price": "160", "currency": "JPY"]]]
            try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99", "EUR": "1.09", "JPY": "160"], simulatorOptions: prices)
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "4.99", "EUR": "5.49"],
                                        simulatorOptions: ["price": "4.99", "currency": "USD", "storefrontPrices": ["FRA": ["price": "5.49", "currency": "EUR"]]])
            _ = try await api.productionSimulator(.PUT, "/admin/apps/\(Self.app)", ["notificationURL": api.base + Self.webhookPath])
            for (user, storefront) in [("ann", "USA"), ("bea", "FRA"), ("kei", "JPN")] {
                _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": user, "storefront": storefront])
            }
            var bought: [String: String] = [:]
            for (user, product, quantity) in [("ann", "coins", 3), ("bea", "coins", 2), ("kei", "coins", 1)] {
                let purchase = try await Self.purchase(api, user, product, quantity: quantity)
                bought[user] = purchase.transactionId
                #expect(try await api.postTransaction(user, device: "\(user)-phone", purchase.jws).status == 200)
            }
            _ = try await api.productionSimulator(.POST, "/admin/transactions/\(bought["kei"]!)/cancel", ["reason": 1])
            try await Self.waitForDeliveries(api)
            _ = try await api.simulator(.POST, "/admin/users", ["userId": "tess"])
            let sandbox = try await api.simulator(.POST, "/admin/purchases", ["userId": "tess", "bundleId": Self.app, "productId": "coins", "quantity": 5])
            #expect(try await api.postTransaction("tess", device: "tess-phone", try #require(sandbox.json["signedTransaction"] as? String)).status == 200)
            let ledger = api.appStoreLedger()
            _ = try await Self.importReport(api, ledger, day: try await Self.reportingDay(api))
            // Bought after the report was imported, of a product it has no line of.
            let later = try await Self.purchase(api, "bea", "pro.monthly")
            #expect(try await api.postTransaction("bea", device: "bea-phone", later.jws).status == 200)
            try await Self.waitForAuditTrail(api)

            func rows() async throws -> [String: [String: Any]] {
                let answer = try await api.send(.GET, "/v1/audit/events?environment=all&limit=100", key: api.keys["finance"])
                #expect(answer.status == 200, "\(answer.text)")
                let events = answer.json["events"] as? [[String: Any]] ?? []
                return Dictionary(uniqueKeysWithValues: events.map { ("\($0["userId"]!)/\($0["event"]!)/\($0["productId"]!)", $0) })
            }
            func proceeds(_ row: [String: Any]?) -> String {
                "\(row?["proceeds"] as? String ?? "null") \(row?["proceedsCurrency"] as? String ?? "null") \(row?["proceedsSource"] as? String ?? "-")"
            }
            // The simulator's report: 70 % of the price, no tax; per unit 0.99 → 0.69, 1.09 → 0.76, 160 → 112.
            var byRow = try await rows()
            #expect(proceeds(byRow["ann/purchase/coins"]) == "2.07 USD apple_report")
            #expect(proceeds(byRow["bea/purchase/coins"]) == "1.52 EUR apple_report")
            #expect(proceeds(byRow["kei/purchase/coins"]) == "112 JPY apple_report")
            #expect(proceeds(byRow["kei/refund/coins"]) == "112 JPY apple_report", "the refund gives back what the sale brought")
            #expect(proceeds(byRow["bea/purchase/pro.monthly"]) == "null null unknown", "no line, no French tax rate: never a guess")
            #expect(proceeds(byRow["tess/purchase/coins"]) == "null null unknown", "sandbox: never in Apple's reports, no US tax rate yet")

            // The operator's tax table turns the unknown into named estimates: 5.49 × (1 − 0.1667) × 0.70 = 3.2024 → 3.20.
            try await ledger.salesReports.setTaxRate(country: "FR", validFrom: "2000-01-01", share: "0.1667")
            try await ledger.salesReports.setTaxRate(country: "US", validFrom: "2000-01-01", share: "0")
            byRow = try await rows()
            #expect(proceeds(byRow["bea/purchase/pro.monthly"]) == "3.2 EUR estimate:standard")
            #expect(proceeds(byRow["tess/purchase/coins"]) == "3.45 USD estimate:standard")
            #expect(proceeds(byRow["ann/purchase/coins"]) == "2.07 USD apple_report", "Apple's figure wins over the estimate")

            // The summary gives gross and proceeds side by side per currency, each the sum of its rows'.
            let summary = try await api.send(.GET, "/v1/audit/summary?groupBy=currency", key: api.keys["finance"])
            let totals = Dictionary(uniqueKeysWithValues: (summary.json["rows"] as? [[String: Any]] ?? []).map { ($0["currency"] as? String ?? "-", $0) })
            func money(_ currency: String) -> String {
                let row = totals[currency]
                return ["gross", "net", "proceeds", "refundedProceeds", "netProceeds", "proceedsCurrency", "proceedsSource"]
                    .map { row?[$0] as? String ?? "null" }.joined(separator: " ")
            }
            #expect(money("EUR") == "7.67 7.67 4.72 0 4.72 EUR mixed", "1.52 from Apple's report and 3.20 estimated")
            #expect(money("USD") == "2.97 2.97 2.07 0 2.07 USD apple_report")
            #expect(money("JPY") == "160 0 112 112 0 JPY apple_report")
            for (currency, row) in totals {
                let ofCurrency = byRow.values.filter { $0["environment"] as? String == "production" && $0["currency"] as? String == currency }
                let sum = ofCurrency.reduce(Decimal(0)) { total, event in
                    let value = Decimal(string: event["proceeds"] as? String ?? "0")!
                    return event["event"] as? String == "refund" ? total - value : total + value
                }
                #expect(Decimal(string: row["netProceeds"] as? String ?? "") == sum, "\(currency): the summary adds its rows' proceeds")
                #expect(row["proceedsUnknown"] as? Int == 0)
            }

            // And the CSVs carry them.
            let csv = try await api.send(.GET, "/v1/audit/events", key: api.keys["finance"], headers: [("Accept", "text/csv")])
            #expect(csv.text.hasPrefix(AuditCSV.header) && AuditCSV.header.hasSuffix(",proceeds,proceeds_currency,proceeds_source\r\n"))
            #expect(csv.text.contains(",3.2,EUR,estimate:standard\r\n"))
            let summaryCSV = try await api.send(.GET, "/v1/audit/summary?groupBy=currency", key: api.keys["finance"], headers: [("Accept", "text/csv")])
            #expect(summaryCSV.text.contains(",7.67,0,0,0,7.67,0,4.72,0,4.72,EUR,mixed,0\r\n"), "\(summaryCSV.text)")
        }
    }

    @Test func reportsAreFetchedFromAppStoreConnectWithTheTeamsKeyADayWithoutSalesIncluded() async throws {
        try await APIHarness.run(productionSimulator: true) { api in
            try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99"], simulatorOptions: ["price": "0.99", "currency": "USD"])
            let made = try await api.productionSimulator(.POST, "/admin/connect-keys")
            let key = AppStoreConnectKey(keyID: try #require(made.json["keyId"] as? String), issuerID: try #require(made.json["issuerId"] as? String),
                                         privateKeyPEM: try #require(made.json["privateKey"] as? String),
                                         vendorNumber: try #require(made.json["vendorNumber"] as? String))
            let ledger = PostgresLedger(client: api.client, secrets: api.secrets, logger: APIHarness.logger)
            try await ledger.registry.setAppStoreConnectKey(key, of: Self.app)
            #expect(try await ledger.registry.appStoreConnectKey(of: Self.app) == key, "sealed, and opened again whole")

            _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": "ann"])
            let bought = try await Self.purchase(api, "ann", "coins", quantity: 2)
            #expect(try await api.postTransaction("ann", device: "phone", bought.jws).status == 200)
            try await Self.waitForAuditTrail(api)
            let day = try await Self.reportingDay(api)
            let before = try #require(Calendar(identifier: .gregorian).date(byAdding: .day, value: -1, to: ISO8601DateFormatter().date(from: day + "T12:00:00Z")!))
            let yesterday = String(ISO8601DateFormatter().string(from: before).prefix(10))

            // Apple asks to slow down once; the fetch waits its Retry-After and goes on.
            _ = try await api.productionSimulator(.PUT, "/admin/faults", ["connectTooManyRequests": 1])
            let source = AppStoreConnectReports(configuration: .init(baseURL: try #require(api.productionSimulatorBase)), key: key)
            let fetch = FetchSalesReports(source: source, importer: ledger.importSalesReports)
            let days = try await fetch.fetch(app: Self.app, from: yesterday, to: day)
            #expect(days.map { $0.outcome?.kind } == [.recorded, .recorded], "\(days.map { $0.failure ?? "" })")
            #expect(days.map { $0.outcome?.lines } == [0, 1], "no sales yesterday: a report with no lines")
            let again = try await fetch.fetch(app: Self.app, from: day, to: day)
            #expect(again.first?.outcome?.kind == .duplicate)
            // Two days without sales are two facts; a day Apple has not published is said, not recorded.
            let earlier = String(ISO8601DateFormatter().string(from: before.addingTimeInterval(-86_400)).prefix(10))
            let tomorrow = String(ISO8601DateFormatter().string(from: before.addingTimeInterval(2 * 86_400)).prefix(10))
            let quiet = try await fetch.fetch(app: Self.app, from: earlier, to: earlier)
            #expect(quiet.first?.outcome?.kind == .recorded && quiet.first?.outcome?.lines == 0)
            let future = try await fetch.fetch(app: Self.app, from: tomorrow, to: tomorrow)
            #expect(future.first?.outcome == nil && future.first?.failure?.contains("no report of \(tomorrow) yet") == true, "\(future)")

            let reconciled = try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: yesterday, to: day)
            #expect(reconciled.rows.count == 1 && reconciled.rows.allSatisfy { $0.status == .matched } && reconciled.days.allSatisfy { $0.report != nil },
                    "\(reconciled.rows)")

            // An agreement for Japan only: its reports are days of Tokyo, the reconciliation's too.
            try await ledger.salesReports.setReportingTimeZone(app: Self.app, "Asia/Tokyo")
            #expect(try await ledger.reconcileSalesReports.reconcile(app: Self.app, from: day, to: day).timeZone == "Asia/Tokyo")
            await #expect(throws: AccessError.self) { try await ledger.salesReports.setReportingTimeZone(app: Self.app, "Mars/Olympus") }

            // Another team's key is refused, saying what the key needs.
            let stranger = AppStoreConnectKey(keyID: "ABCDEFGHIJ", issuerID: key.issuerID, privateKeyPEM: P256.Signing.PrivateKey().pemRepresentation,
                                              vendorNumber: key.vendorNumber)
            await #expect {
                _ = try await AppStoreConnectReports(configuration: .init(baseURL: try #require(api.productionSimulatorBase)), key: stranger)
                    .summarySalesReport(day: day)
            } throws: { error in
                (error as? SalesReportFetchError)?.code == .refused && "\(error)".contains("Sales or Finance role")
            }
        }
    }

    @Test func aBrokenReportIsRefusedWithItsLineAndNothingIsRecorded() async throws {
        try await APIHarness.run { api in
            let header = "Provider\tSKU\tTitle\tProduct Type Identifier\tUnits\tDeveloper Proceeds\tBegin Date\tEnd Date\tCustomer Currency\tCountry Code\tCurrency of Proceeds\tApple Identifier\tCustomer Price\n"
            let broken = header + "APPLE\tcoins\tCoins\tIA1\t2\t0.70\t11/01/2026\t11/01/2026\tUSD\tUS\tUSD\t123\t0.99\n"
                + "APPLE\tcoins\tCoins\tIA1\tmany\t0.70\t11/01/2026\t11/01/2026\tUSD\tUS\tUSD\t123\t0.99\n"
            #expect {
                _ = try SalesReportParser.parse(Data(broken.utf8))
            } throws: { error in
                "\(error)".contains("line 3") && "\(error)".contains("Units")
            }
            let stream = try StreamID.reports(app: Self.app)
            #expect(try await PostgresEventStore(client: api.client, logger: APIHarness.logger).readStream(stream, fromVersion: 1, limit: 10).isEmpty)
        }
    }

    // MARK: Helpers

    /// Coins in three countries, a monthly subscription in two, one with a free trial, and levels a family can share.
    static func defineCatalog(_ api: APIHarness) async throws {
        let prices: [String: Any] = ["price": "0.99", "currency": "USD",
                                     "storefrontPrices": ["FRA": ["price": "1.09", "currency": "EUR"], "JPN": ["price": "160", "currency": "JPY"]]]
        try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99", "EUR": "1.09", "JPY": "160"], simulatorOptions: prices)
        try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M", group: "pro", prices: ["USD": "4.99", "EUR": "5.49"],
                                    simulatorOptions: ["price": "4.99", "currency": "USD", "storefrontPrices": ["FRA": ["price": "5.49", "currency": "EUR"]]])
        try await api.defineProduct("plus.monthly", type: "auto_renewable", duration: "P1M", group: "plus", prices: ["USD": "2.99"],
                                    simulatorOptions: ["price": "2.99", "currency": "USD", "introOffer": ["kind": "free_trial", "periods": 1]])
        try await api.defineProduct("levels", type: "non_consumable", prices: ["USD": "2.99"],
                                    simulatorOptions: ["price": "2.99", "currency": "USD", "familyShareable": true])
    }

    static func purchase(_ api: APIHarness, _ user: String, _ product: String, quantity: Int = 1) async throws -> (transactionId: String, jws: String) {
        let bought = try await api.productionSimulator(.POST, "/admin/purchases", ["userId": user, "bundleId": app, "productId": product, "quantity": quantity])
        guard let jws = bought.json["signedTransaction"] as? String,
              let id = (bought.json["transaction"] as? [String: Any])?["transactionId"] as? String
        else { throw HarnessError(message: "the simulator did not sell \(product) to \(user): \(bought.text)") }
        return (id, jws)
    }

    /// Today in Apple's reporting time zone, by the simulator's clock.
    static func reportingDay(_ api: APIHarness) async throws -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: ReconcileSalesReports.defaultTimeZone)!
        let parts = calendar.dateComponents([.year, .month, .day], from: Date())
        return String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
    }

    /// The production simulator's report of `day`, gzip as Apple delivers it, parsed and recorded.
    static func importReport(_ api: APIHarness, _ ledger: PostgresLedger, day: String) async throws -> ImportSalesReports.Outcome {
        let answer = try await api.productionSimulator(.GET, "/admin/apps/\(app)/sales-reports/\(day)")
        guard answer.status == 200 else { throw HarnessError(message: "no report: \(answer.status) \(answer.text)") }
        let content = answer.body
        #expect(Gzip.isGzip(content), "Apple's reports come gzipped")
        // A day without sales is a report without lines: its day is the one asked for, as from App Store Connect.
        let file = try SalesReportParser.parse(content, reportDate: day)
        #expect(file.reportDate == day)
        return try await ledger.importSalesReports.record(ReceivedSalesReport(
            content: content, reportDate: file.reportDate, columns: file.columns, lines: file.lines, otherLines: file.otherLines,
            source: "file:S_D_85000000_\(day.replacingOccurrences(of: "-", with: "")).txt.gz", vendorNumber: "85000000"
        ), app: app)
    }

    /// Every notification the production simulator sent has been answered.
    static func waitForDeliveries(_ api: APIHarness) async throws {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let listed = try await api.productionSimulator(.GET, "/admin/notifications").json["notifications"] as? [[String: Any]] ?? []
            if listed.allSatisfy({ $0["delivered"] as? Bool == true }) { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw HarnessError(message: "the production simulator's notifications were not all delivered")
    }

    /// The audit trail has caught up with the log's head (the route waits for it).
    static func waitForAuditTrail(_ api: APIHarness) async throws {
        var head = 0
        for try await value in try await api.client.query("SELECT coalesce(max(\"position\"), 0)::int FROM ledger.events").decode(Int.self) { head = value }
        let caughtUp = try await api.send(.GET, "/v1/audit/summary?minPosition=\(head)", key: api.keys["finance"])
        guard caughtUp.status == 200 else { throw HarnessError(message: "the audit trail did not reach \(head): \(caughtUp.text)") }
    }
}
