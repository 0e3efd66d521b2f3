import AppStoreSimulator
import Foundation
import LedgerApplication
import LedgerDemo
import LedgerDomain
import LedgerDomainTesting
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// `GET /finance` in a real headless Chromium against a real ledger: the page signs in with a
/// finance key, shows the demo's numbers as the summary route gives them, follows its filters,
/// opens the audit rows behind a point, and downloads exactly the API's CSV. Screenshots go to
/// `.build/finance-page/`.
@Suite(.serialized) struct FinancePageTests {
    static let otherApp = "com.example.othershop"

    /// The demo's stories told through the harness's ledger, and a second app with one purchase
    /// in euros by a user no story has, whose key is returned.
    private func seed(_ api: APIHarness) async throws -> (otherKey: String, head: Int64) {
        let client = DemoClient(ledgerBase: api.base, apiKey: api.allKey, simulatorBase: api.simulatorBase, bundleId: APIHarness.app)
        _ = try await DemoStories(client: client).runAll()
        // A product the App Store sold that the catalog does not know, posted without a price.
        _ = try await api.simulator(.PUT, "/admin/apps/\(APIHarness.app)/products/mystery.box", ["type": "consumable"])
        let mystery = try await api.buy("gus", "mystery.box")
        #expect(try await api.ingest("gus", device: "phone", receipt: mystery.receipt).status == 200)

        let secret = try #require(try await api.simulator(.PUT, "/admin/apps/\(Self.otherApp)").json["sharedSecret"] as? String)
        let registry = AppRegistry(client: api.client, logger: APIHarness.logger, secrets: api.secrets)
        try await registry.addApp(Self.otherApp, sharedSecret: secret)
        let otherKey = try await registry.createKey(app: Self.otherApp, scopes: Set(APIScope.allCases)).token
        _ = try await api.simulator(.PUT, "/admin/apps/\(Self.otherApp)/products/gold.bar", ["type": "consumable"])
        let defined = try await api.send(.PUT, "/v1/apps/\(Self.otherApp)/products/gold.bar", key: otherKey,
                                         json: ["type": "consumable", "prices": ["EUR": "4.49"]])
        #expect(defined.status == 200, "\(defined.text)")
        _ = try await api.simulator(.POST, "/admin/users", ["userId": "zoe-elsewhere"])
        let bought = try await api.simulator(.POST, "/admin/purchases", ["userId": "zoe-elsewhere", "bundleId": Self.otherApp, "productId": "gold.bar", "quantity": 2])
        let receipt = try #require(bought.json["receipt"] as? String, "\(bought.text)")
        let ingested = try await api.send(.POST, "/v1/apps/\(Self.otherApp)/receipts", key: otherKey,
                                          json: ["userId": "zoe-elsewhere", "deviceId": "kiosk", "receiptData": receipt])
        #expect(ingested.status == 200, "\(ingested.text)")

        var head: Int64 = 0
        for try await position in try await api.client.query("SELECT coalesce(max(position), 0) FROM ledger.events", logger: APIHarness.logger)
            .decode(Int64.self) { head = position }
        // Every projection the page reads has reached the log's head before the browser looks.
        let caughtUp = try await api.send(.GET, "/v1/audit/restores?environment=sandbox&minPosition=\(head)", key: api.keys["finance"])
        #expect(caughtUp.status == 200, "\(caughtUp.text)")
        return (otherKey, head)
    }

    /// Signs in through the form and waits for the first load.
    private func signIn(_ browser: Browser, _ api: APIHarness, key: String?) async throws {
        try await browser.open(api.base + "/finance")
        try await browser.type("#key", key ?? "")
        try await browser.click("#sign-in-form button[type=submit]")
    }

    /// Chooses filters in the form as a user would, applies them and waits for the page to redraw.
    private func apply(_ browser: Browser, environment: String? = nil, product: String? = nil, user: String? = nil, interval: String? = nil) async throws {
        let before = try await browser.run("return document.body.dataset.loaded || ''") as? String ?? ""
        if let environment { try await browser.choose("#f-environment", value: environment) }
        if let product { try await browser.choose("#f-product", value: product) }
        if let interval { try await browser.choose("#f-interval", value: interval) }
        if let user { try await browser.type("#f-user", user) }
        try await browser.click("#filters button[type=submit]")
        try await browser.wait(for: "the page to load", "return (document.body.dataset.loaded || '') !== arguments[0]", [before])
    }

    /// What the page shows in a currency's money table: bucket → series → decimal text.
    private func moneyShown(_ browser: Browser, currency: String) async throws -> [String: [String: Decimal]] {
        let cells = try await browser.run("""
            const out = {};
            for (const row of document.querySelectorAll('section.currency[data-currency="' + arguments[0] + '"] tbody tr[data-bucket]')) {
                out[row.dataset.bucket] = {};
                for (const cell of row.querySelectorAll('td[data-series]')) out[row.dataset.bucket][cell.dataset.series] = cell.textContent;
            }
            return out;
            """, [currency]) as? [String: [String: String]] ?? [:]
        return cells.mapValues { $0.compactMapValues { Decimal(string: $0) } }
    }

    /// Every interval of the summary is on the page with its numbers; intervals between them show zero.
    private func expectSameMoney(_ shown: [String: [String: Decimal]], _ expected: [String: [String: Decimal]], _ label: String,
                                 sourceLocation: SourceLocation = #_sourceLocation) {
        for (bucket, numbers) in expected {
            #expect(shown[bucket] == numbers, "\(label), \(bucket): the page shows \(shown[bucket] ?? [:]), the API \(numbers)", sourceLocation: sourceLocation)
        }
        for (bucket, numbers) in shown where expected[bucket] == nil {
            #expect(numbers.values.allSatisfy { $0 == 0 }, "\(label), \(bucket): \(numbers) on the page, nothing in the API", sourceLocation: sourceLocation)
        }
    }

    /// The summary route's money by day for one currency, as the page should show it.
    private func moneyFromAPI(_ api: APIHarness, query: String, currency: String) async throws -> [String: [String: Decimal]] {
        let answer = try await api.send(.GET, "/v1/audit/summary?groupBy=day,currency&\(query)", key: api.keys["finance"])
        #expect(answer.status == 200, "\(answer.text)")
        var days: [String: [String: Decimal]] = [:]
        let rows = (answer.json["rows"] as? [[String: Any]] ?? []).filter { $0["currency"] as? String == currency }
        // Proceeds are drawn once some row's are known; those Apple pays in another currency are only named.
        let proceedsKnown = rows.contains { $0["netProceeds"] is String }
        for row in rows {
            let day = try #require(row["day"] as? String)
            var numbers = days[day] ?? ["Gross": 0, "Refunds": 0, "Net": 0]
            numbers["Gross"]! += Decimal(string: row["gross"] as? String ?? "") ?? -1
            numbers["Refunds"]! += Decimal(string: row["refundedAmount"] as? String ?? "") ?? -1
            numbers["Net"]! += Decimal(string: row["net"] as? String ?? "") ?? -1
            if proceedsKnown {
                let inCurrency = row["proceedsCurrency"] as? String == currency
                numbers["Net proceeds", default: 0] += inCurrency ? Decimal(string: row["netProceeds"] as? String ?? "0") ?? -1 : 0
            }
            days[day] = numbers
        }
        return days
    }

    @Test func theFinancePageShowsTheDemosNumbersFollowsFiltersDrillsDownAndDownloadsTheAPIsCSV() async throws {
        try await APIHarness.run { api in
            _ = try await seed(api)
            try await Browser.with { browser in
                try await signIn(browser, api, key: api.keys["finance"])
                try await browser.wait(for: "the dashboard", "return document.body.dataset.loaded !== undefined")
                #expect(try await browser.text("#who").contains(APIHarness.app))
                // Production is the default: the demo's purchases are sandbox money, so nothing, and a hint says where to look.
                #expect(try await browser.text("#money").contains("choose “Sandbox”"))
                #expect(try await browser.run("return document.getElementById('environment-banner').hidden") as? Bool == true)

                try await apply(browser, environment: "sandbox")
                try await browser.screenshot("sandbox-1280x800")
                #expect(try await browser.text("#environment-banner").contains("SANDBOX"), "sandbox money is labelled as such")
                let shown = try await moneyShown(browser, currency: "USD")
                let expected = try await moneyFromAPI(api, query: "environment=sandbox", currency: "USD")
                #expect(!expected.isEmpty)
                expectSameMoney(shown, expected, "sandbox")

                // Subscription metrics: the page's months are the API's, figure by figure.
                var calendar = Calendar(identifier: .gregorian)
                calendar.timeZone = TimeZone(identifier: "UTC")!
                let thisMonth = calendar.date(from: calendar.dateComponents([.year, .month], from: Date()))!
                let range = (from: calendar.date(byAdding: .month, value: -11, to: thisMonth)!, to: calendar.date(byAdding: .month, value: 1, to: thisMonth)!)
                let metrics = try await api.send(.GET, "/v1/audit/metrics?environment=sandbox&interval=month&from=\(ISO8601DateFormatter().string(from: range.from))&to=\(ISO8601DateFormatter().string(from: range.to))",
                                                 key: api.keys["finance"])
                #expect(metrics.status == 200, "\(metrics.text)")
                var fromAPI: [String: [String: String]] = [:]
                for row in metrics.json["subscriptions"] as? [[String: Any]] ?? [] where row["currency"] as? String == "USD" {
                    let month = row["interval"] as? String ?? ""
                    fromAPI[month] = ["MRR": row["mrr"] as? String ?? "", "New": "\(row["new"] as? Int ?? -1)", "Reactivated": "\(row["reactivated"] as? Int ?? -1)",
                                      "Churned": "\(row["churned"] as? Int ?? -1)", "Active at end": "\(row["activeAtEnd"] as? Int ?? -1)",
                                      "Trials started": "\(row["trialsStarted"] as? Int ?? -1)", "Converted": "\(row["trialsConverted"] as? Int ?? -1)",
                                      "Expired": "\(row["trialsExpired"] as? Int ?? -1)", "Churn rate": row["churnRate"] as? String ?? "–"]
                }
                for row in metrics.json["refunds"] as? [[String: Any]] ?? [] where row["currency"] as? String == "USD" {
                    let month = row["interval"] as? String ?? ""
                    guard fromAPI[month] != nil else { continue }
                    fromAPI[month]?["Refund rate (count)"] = row["refundRateByCount"] as? String ?? "–"
                    fromAPI[month]?["Refund rate (amount)"] = row["refundRateByAmount"] as? String ?? "–"
                }
                #expect(!fromAPI.isEmpty, "the demo has an auto-renewable subscription: \(metrics.text)")
                let onPage = try await browser.run("""
                    const out = {};
                    for (const row of document.querySelectorAll('#metrics section.metrics[data-currency="USD"] tbody tr[data-bucket]')) {
                        out[row.dataset.bucket] = out[row.dataset.bucket] || {};
                        for (const cell of row.querySelectorAll('td[data-series]')) out[row.dataset.bucket][cell.dataset.series] = cell.textContent;
                    }
                    return out;
                    """) as? [String: [String: String]] ?? [:]
                for (month, figures) in fromAPI {
                    let shown = onPage[month] ?? [:]
                    #expect(Decimal(string: shown["MRR"] ?? "") == Decimal(string: figures["MRR"] ?? ""), "\(month): \(shown) against \(figures)")
                    for name in ["New", "Reactivated", "Churned", "Active at end", "Trials started", "Converted", "Expired", "Churn rate"] {
                        #expect(shown[name] == figures[name], "\(month) \(name): \(shown)")
                    }
                    for name in ["Refund rate (count)", "Refund rate (amount)"] { #expect(shown[name] == figures[name] ?? "–", "\(month) \(name): \(shown)") }
                }

                // The cohort table: each cell the API's net money of the cohort in that month since.
                let cohortsOnPage = try await browser.run("""
                    const out = {};
                    for (const row of document.querySelectorAll('#metrics details.cohorts[data-currency="USD"] tbody tr[data-cohort]')) {
                        for (const cell of row.querySelectorAll('td[data-months-since]')) {
                            if (cell.textContent) out[row.dataset.cohort + ' ' + cell.dataset.monthsSince] = cell.textContent;
                        }
                    }
                    return out;
                    """) as? [String: String] ?? [:]
                var cohortsFromAPI: [String: String] = [:]
                for cell in metrics.json["cohorts"] as? [[String: Any]] ?? [] where cell["currency"] as? String == "USD" {
                    cohortsFromAPI["\(cell["cohort"] as? String ?? "") \(cell["monthsSince"] as? Int ?? -1)"] = cell["net"] as? String ?? ""
                }
                #expect(!cohortsFromAPI.isEmpty && Set(cohortsOnPage.keys) == Set(cohortsFromAPI.keys), "\(cohortsOnPage) against \(cohortsFromAPI)")
                for (key, net) in cohortsFromAPI { #expect(Decimal(string: cohortsOnPage[key] ?? "") == Decimal(string: net), "cohort \(key)") }

                // Counts: purchases, renewals and refunds as the summary counts them.
                let counts = try await browser.run("""
                    const out = {};
                    for (const cell of document.querySelectorAll('#counts td[data-series]')) out[cell.dataset.series] = (out[cell.dataset.series] || 0) + Number(cell.textContent);
                    return out;
                    """) as? [String: Int] ?? [:]
                for (type, series, field) in [("purchase", "Purchases", "purchases"), ("renewal", "Renewals", "purchases"), ("refund", "Refunds", "refunds")] {
                    let rows = try await api.send(.GET, "/v1/audit/summary?environment=sandbox&type=\(type)", key: api.keys["finance"]).json["rows"] as? [[String: Any]] ?? []
                    #expect(counts[series] == rows.reduce(0) { $0 + ($1[field] as? Int ?? 0) }, "\(series): \(counts)")
                }
                #expect(counts["Renewals", default: 0] > 0 && counts["Refunds", default: 0] > 0, "the demo renews and refunds: \(counts)")
                // The warnings: the unpriced rows counted as the summary counts them, the product the catalog lacks named.
                let unpriced = (try await api.send(.GET, "/v1/audit/summary?environment=sandbox", key: api.keys["finance"]).json["rows"] as? [[String: Any]] ?? [])
                    .reduce(0) { $0 + ($1["unpriced"] as? Int ?? 0) }
                #expect(unpriced == 1)
                #expect(try await browser.text("[data-warning=unpriced]").hasPrefix("\(unpriced) row has no price"))
                #expect(try await browser.text("[data-warning=unclassified]").hasPrefix("1 product was sold that the catalog does not define"))
                #expect(try await browser.text("#warnings-body").contains("mystery.box: 1 transaction, 1 unit, 1 user"))
                try await browser.run("document.getElementById('money').closest('section').scrollIntoView()")
                try await browser.screenshot("charts-1280x800")
                // The demo restores two season-pass periods to a new device and has an active subscription.
                #expect(try await browser.text("#nonrenewing").contains("season_pass: restored to new devices"))
                #expect(try await browser.text("#subscriptions").contains("pro_monthly"))

                // A chart's table downloads the rows behind all its numbers: the API's CSV for the same filters.
                try browser.clearDownloads()
                try await browser.click("section.currency[data-currency=\"USD\"] details.numbers summary")
                try await browser.click("section.currency[data-currency=\"USD\"] button.download")
                let tableCSV = try await browser.download(named: "audit-\(APIHarness.app).csv")
                let apiCSV = try await api.send(.GET, "/v1/audit/events?environment=sandbox&currency=USD", key: api.keys["finance"], headers: [("Accept", "text/csv")])
                #expect(tableCSV == apiCSV.body, "the table's CSV has \(tableCSV.count) bytes, the API's \(apiCSV.body.count)")

                // The non-renewing table: the periods sold download is the API's CSV of exactly those rows,
                // and the page counts as many sold as that query lists.
                try browser.clearDownloads()
                try await browser.click("#nonrenewing details.numbers summary")
                try await browser.click("#nonrenewing button.download")
                let soldCSV = try await browser.download(named: "audit-\(APIHarness.app).csv")
                let soldQuery = "/v1/audit/events?environment=sandbox&type=purchase&productType=non_renewing"
                #expect(soldCSV == (try await api.send(.GET, soldQuery, key: api.keys["finance"], headers: [("Accept", "text/csv")])).body)
                let soldRows = (try await api.send(.GET, soldQuery, key: api.keys["finance"]).json["events"] as? [[String: Any]])?.count ?? -1
                let soldShown = try await browser.run(
                    "return [...document.querySelectorAll('#nonrenewing td[data-series$=\": sold\"]')].reduce((n, c) => n + Number(c.textContent), 0)"
                ) as? Int
                #expect(soldRows == 2 && soldShown == soldRows, "the page counts \(soldShown ?? -1) periods sold, the API lists \(soldRows)")

                // Per month: each month's totals are its days' totals added up.
                try await apply(browser, interval: "month")
                let months = try await moneyShown(browser, currency: "USD")
                var expectedMonths: [String: [String: Decimal]] = [:]
                for (day, numbers) in expected {
                    expectedMonths[String(day.prefix(7)), default: [:]].merge(numbers) { $0 + $1 }
                }
                expectSameMoney(months, expectedMonths, "per month")
                try await apply(browser, interval: "day")

                // One user's money only.
                try await apply(browser, user: "alice")
                let alice = try await moneyShown(browser, currency: "USD")
                let aliceExpected = try await moneyFromAPI(api, query: "environment=sandbox&userId=alice", currency: "USD")
                #expect(!aliceExpected.isEmpty)
                expectSameMoney(alice, aliceExpected, "alice")
                try await apply(browser, user: "")

                // A filter changes the numbers: one product only.
                try await apply(browser, product: "coins")
                let coins = try await moneyShown(browser, currency: "USD")
                let coinsExpected = try await moneyFromAPI(api, query: "environment=sandbox&productId=coins", currency: "USD")
                expectSameMoney(coins, coinsExpected, "coins")
                #expect(coins != shown, "choosing a product changed nothing")

                // Drill-down: the Gross bar of the first day with coins opens exactly the audit rows behind it.
                let day = try #require(coinsExpected.keys.sorted().first)
                try await browser.click("section.currency[data-currency=\"USD\"] a[data-series=\"Gross\"][data-bucket=\"\(day)\"]")
                try await browser.wait(for: "the rows", "return !document.getElementById('drill').hidden && document.querySelectorAll('#drill-table tbody tr[data-position]').length > 0")
                let listed = try await browser.run("return [...document.querySelectorAll('#drill-table tbody tr[data-position]')].map(r => Number(r.dataset.position))") as? [Int] ?? []
                let start = try #require(ISO8601DateFormatter().date(from: day + "T00:00:00Z"))
                let next = ISO8601DateFormatter().string(from: start.addingTimeInterval(86_400))
                let query = "environment=sandbox&productId=coins&currency=USD&type=purchase,renewal&from=\(day)T00:00:00Z&to=\(next)"
                let rows = try await api.send(.GET, "/v1/audit/events?\(query)", key: api.keys["finance"]).json["events"] as? [[String: Any]] ?? []
                #expect(listed == rows.compactMap { $0["position"] as? Int }, "the drill-down lists \(listed); the API \(query)")
                #expect(try await browser.text("#drill-query").contains("/v1/audit/events?"), "the page shows the query behind the rows")
                try await browser.screenshot("drill-down-1280x800")

                // The CSV download is the API's CSV for the same query, byte for byte.
                try browser.clearDownloads()
                try await browser.click("#drill-csv")
                let saved = try await browser.download(named: "audit-\(APIHarness.app).csv")
                let csv = try await api.send(.GET, "/v1/audit/events?\(query)", key: api.keys["finance"], headers: [("Accept", "text/csv")])
                #expect(saved == csv.body, "downloaded \(saved.count) bytes, the API sent \(csv.body.count)")
                #expect(String(decoding: saved, as: UTF8.self).hasPrefix("position,occurred_at,"))

                // The keyboard reaches the bars: focus one, press Enter, and its rows open.
                try await browser.click("#drill-close")
                try await browser.run("document.querySelector('#counts a[data-series]').focus()")
                try await browser.press("\u{E007}")
                try await browser.wait(for: "the rows of a bar chosen with the keyboard",
                                       "return !document.getElementById('drill').hidden && document.activeElement.id === 'drill-title'")

                // A phone-sized window: nothing wider than the screen.
                try await browser.resize(width: 390, height: 844)
                try await apply(browser, product: "")
                try await browser.screenshot("sandbox-390x844")
                let overflow = try await browser.run("return document.documentElement.scrollWidth - document.documentElement.clientWidth") as? Int
                #expect(overflow == 0, "the page is \(overflow ?? -1) px wider than a phone's screen")
            }
        }
    }

    @Test func theReconciliationViewShowsTheAPIsDifferencesDrillsIntoTheLedgersRowsAndDownloadsItsCSV() async throws {
        let authority = try SimulatorCertificateAuthority()
        try await APIHarness.run(productionSimulator: true, authority: authority) { api in
            try await api.defineProduct("coins", type: "consumable", prices: ["USD": "0.99", "EUR": "1.09"],
                                        simulatorOptions: ["price": "0.99", "currency": "USD", "storefrontPrices": ["FRA": ["price": "1.09", "currency": "EUR"]]])
            var annCoins = ""
            for (user, storefront, posted) in [("ann", "USA", true), ("bea", "FRA", true), ("zed", "USA", false)] {
                _ = try await api.productionSimulator(.POST, "/admin/users", ["userId": user, "storefront": storefront])
                let bought = try await SalesReconciliationTests.purchase(api, user, "coins", quantity: 2)
                if posted { #expect(try await api.postTransaction(user, device: "phone", bought.jws).status == 200) }
                if user == "ann" { annCoins = bought.transactionId }
            }
            let day = try await SalesReconciliationTests.reportingDay(api)
            _ = try await SalesReconciliationTests.importReport(api, api.appStoreLedger(), day: day)
            try await SalesReconciliationTests.waitForAuditTrail(api)
            let query = "from=\(day)&to=\(day)&timeZone=America%2FLos_Angeles"
            let expected = try await api.send(.GET, "/v1/audit/reconciliation?\(query)", key: api.keys["finance"])
            let differing = (expected.json["rows"] as? [[String: Any]] ?? []).filter { $0["status"] as? String == "differs" }
            #expect(differing.count == 1, "\(expected.text)")
            let row = try #require(differing.first)
            let (country, appleSold, ledgerSold) = (row["country"] as? String, (row["apple"] as? [String: Any])?["unitsSold"] as? Int ?? -1,
                                                    (row["ledger"] as? [String: Any])?["unitsSold"] as? Int ?? -1)
            let transaction = annCoins

            try await Browser.with { browser in
                try await signIn(browser, api, key: api.keys["finance"])
                try await browser.wait(for: "the dashboard", "return document.body.dataset.loaded !== undefined")
                try await browser.run("document.getElementById('r-from').value = arguments[0]; document.getElementById('r-to').value = arguments[0]", [day])
                try await browser.click("#reconcile-form button[type=submit]")
                try await browser.wait(for: "the reconciliation", "return document.body.dataset.reconciled !== undefined")
                try await browser.screenshot("reconciliation-1280x800")

                // The money charts show proceeds beside gross, as the summary gives them, and say where they come from.
                for currency in ["USD", "EUR"] {
                    let money = try await moneyFromAPI(api, query: "", currency: currency)
                    #expect(money.values.contains { $0["Net proceeds", default: 0] > 0 }, "\(currency): \(money)")
                    expectSameMoney(try await moneyShown(browser, currency: currency), money, "proceeds in \(currency)")
                    let note = try await browser.text("section.currency[data-currency=\"\(currency)\"] .proceeds-note")
                    #expect(note.hasPrefix("Proceeds from Apple's sales reports."), "\(note)")
                }

                // The days at a glance, and the one row that differs, with the API's numbers and reason.
                #expect(try await browser.run("return document.querySelector('#reconcile-days tr[data-day=\"' + arguments[0] + '\"]').className", [day]) as? String == "differs")
                let shown = try await browser.run("""
                    return [...document.querySelectorAll('#reconcile-table tbody tr')].map((tr) => ({
                      status: tr.dataset.status, product: tr.dataset.product, country: tr.dataset.country,
                      appleSold: tr.querySelector('[data-column=appleSold]').textContent, ledgerSold: tr.querySelector('[data-column=ledgerSold]').textContent,
                      codes: [...tr.querySelectorAll('li[data-code]')].map((li) => li.dataset.code) }));
                    """) as? [[String: Any]] ?? []
                #expect(shown.count == 1, "\(shown)")
                #expect(shown.first?["country"] as? String == country && shown.first?["status"] as? String == "differs")
                #expect(shown.first?["appleSold"] as? String == "\(appleSold)" && shown.first?["ledgerSold"] as? String == "\(ledgerSold)")
                #expect(shown.first?["codes"] as? [String] == ["not_in_ledger"])

                // Its rows: the drill-down lists the ledger's transaction behind it.
                try await browser.click("#reconcile-table button.cell")
                try await browser.wait(for: "the ledger's rows", "return !document.getElementById('drill').hidden && document.querySelectorAll('#drill-table tbody tr[data-position]').length > 0")
                #expect(try await browser.text("#drill-table").contains(transaction), "the drill-down shows \(transaction)")
                #expect(try await browser.text("#drill-note").contains(transaction))

                // The CSV is the API's, byte for byte.
                try browser.clearDownloads()
                try await browser.click("#reconcile-csv")
                let saved = try await browser.download(named: "reconciliation-\(APIHarness.app)-\(day)-\(day).csv")
                let csv = try await api.send(.GET, "/v1/audit/reconciliation?\(query)", key: api.keys["finance"], headers: [("Accept", "text/csv")])
                #expect(saved == csv.body, "downloaded \(saved.count) bytes, the API sent \(csv.body.count)")

                // A period the wrong way round is refused in the page, before any request.
                try await browser.run("document.getElementById('r-to').value = '2001-01-01'")
                try await browser.click("#reconcile-form button[type=submit]")
                #expect(try await browser.text("#reconcile-status").contains("must not be after"))
            }
        }
    }

    @Test func theClosedMonthsPanelShowsTheFrozenFiguresAndTheAdjustmentsWithTheirCauseAndCSV() async throws {
        try await APIHarness.run(periodSigner: try PeriodRoutesTests.signer()) { api in
            let ledger = try await PeriodRoutesTests.seedOctober(api)
            let finance = api.keys["finance"]
            let closed = try await api.send(.POST, "/v1/audit/periods/2026-10/close?minPosition=\(try await PeriodRoutesTests.head(api))", key: finance)
            #expect(closed.status == 201, "\(closed.text)")
            _ = try await ledger.handler.execute(app: APIHarness.app, user: "ann") { state, _ in
                (try UserDecisions.revoke(transactionId: "t1", revokedAt: LedgerJSON.parseTimestamp("2026-10-25T00:00:00Z")!, reason: "refund", on: state), ())
            }
            _ = try await api.send(.GET, "/v1/audit/summary?minPosition=\(try await PeriodRoutesTests.head(api))", key: finance)
            let expected = try await api.send(.GET, "/v1/audit/adjustments?period=2026-10", key: finance)
            let listed = (expected.json["adjustments"] as? [[String: Any]] ?? []).map { "\($0["kind"] as? String ?? "") \($0["netChange"] as? String ?? "")" }
            #expect(listed == ["added -1.98"])

            try await Browser.with { browser in
                try await signIn(browser, api, key: finance)
                try await browser.wait(for: "the dashboard", "return document.body.dataset.loaded !== undefined")
                try await browser.run("document.getElementById('f-from').value = '2026-10-01'; document.getElementById('f-to').value = '2026-11-01'")
                try await apply(browser)
                // The money panel says October is closed; the panel shows its frozen net and a valid signature.
                #expect(try await browser.text("#closed-note").contains("Closed months in this period: 2026-10"))
                #expect(try await browser.text("#periods-table tr[data-period=\"2026-10\"] [data-column=net]") == "3.96 USD")
                #expect(try await browser.text("#periods-table tr[data-period=\"2026-10\"] [data-column=signature]") == "valid")
                // Its adjustments: the API's, with their cause.
                try await browser.click("#periods-table tr[data-period=\"2026-10\"] button.cell")
                try await browser.wait(for: "the adjustments", "return document.querySelectorAll('#adjustments-table tbody tr').length > 0")
                let shown = try await browser.run("""
                    return [...document.querySelectorAll('#adjustments-table tbody tr')].map((tr) => tr.dataset.kind + ' ' + tr.querySelector('[data-column=netChange]').textContent);
                    """) as? [String] ?? []
                #expect(shown == listed, "\(shown)")
                #expect(try await browser.text("#adjustments-table").contains("PurchaseRevoked.v1"))
                try browser.clearDownloads()
                try await browser.click("#adjustments-csv")
                let saved = try await browser.download(named: "adjustments-\(APIHarness.app)-2026-10.csv")
                let csv = try await api.send(.GET, "/v1/audit/adjustments?period=2026-10", key: finance, headers: [("Accept", "text/csv")])
                #expect(saved == csv.body, "the page saves the API's CSV byte for byte")
            }
        }
    }

    @Test func aWrongKeyIsToldWhyAndAnotherAppsDataIsNeverShown() async throws {
        try await APIHarness.run { api in
            let (otherKey, _) = try await seed(api)
            try await Browser.with { browser in
                try await signIn(browser, api, key: "lk_0000000000000000_not-a-real-key")
                try await browser.wait(for: "the refusal", "return document.getElementById('sign-in-error').textContent.length > 0")
                #expect(try await browser.text("#sign-in-error").contains("This key was refused"))
                #expect(try await browser.run("return document.getElementById('dashboard').hidden") as? Bool == true)
                #expect(try await browser.run("return sessionStorage.length") as? Int == 0, "a refused key is not kept")
                try await browser.screenshot("wrong-key")

                try await signIn(browser, api, key: api.keys["read"])
                try await browser.wait(for: "the scope refusal", "return document.getElementById('sign-in-error').textContent.includes('no finance scope')")
                #expect(try await browser.run("return document.getElementById('dashboard').hidden") as? Bool == true)

                // This app's finance key: the key lives in session storage, never in the URL or a cookie.
                try await signIn(browser, api, key: api.keys["finance"])
                try await browser.wait(for: "the dashboard", "return document.body.dataset.loaded !== undefined")
                try await apply(browser, environment: "all")
                let page = try await browser.run("return document.body.innerText + [...document.querySelectorAll('option')].map(o => o.value).join(' ')") as? String ?? ""
                #expect(!page.contains("zoe-elsewhere") && !page.contains("gold.bar") && !page.contains("EUR"), "another app's data is on the page")
                #expect(page.contains("USD"))
                #expect(try await browser.run("return location.href") as? String == api.base + "/finance")
                #expect(try await browser.run("return document.cookie") as? String == "")
                #expect(try await browser.run("return sessionStorage.getItem('ledger.financeKey')") as? String == api.keys["finance"])

                // The other app's key shows its euros and none of this app's.
                try await browser.click("#sign-out")
                try await signIn(browser, api, key: otherKey)
                try await browser.wait(for: "the other app's dashboard", "return document.body.dataset.loaded !== undefined && document.getElementById('who').textContent.includes(arguments[0])", [Self.otherApp])
                try await apply(browser, environment: "sandbox")
                let theirs = try await browser.run("return document.body.innerText") as? String ?? ""
                #expect(theirs.contains("EUR") && !theirs.contains("USD") && !theirs.contains("season_pass"), "\(theirs.prefix(400))")
                let euros = try await moneyShown(browser, currency: "EUR")
                #expect(euros.values.contains { $0["Gross"] == Decimal(string: "8.98") }, "2 × 4.49 EUR: \(euros)")
            }
        }
    }
}
