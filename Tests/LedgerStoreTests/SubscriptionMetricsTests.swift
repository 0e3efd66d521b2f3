import Foundation
import LedgerApplication
import LedgerDomain
import LedgerDomainTesting
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

/// The subscription figures against a history worked out by hand: monthly and yearly plans, a
/// trial that converts and one that expires, a lapse and a reactivation, a refunded renewal, two
/// currencies.
@Suite struct SubscriptionMetricsTests {
    static let app = "com.example.metrics"

    static func at(_ day: String) -> Date { LedgerJSON.parseTimestamp(day + "T12:00:00Z")! }

    @Test func theFiguresOfEachMonthAreTheOnesWorkedOutByHand() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let ledger = PostgresLedger(client: client, logger: TestDatabase.logger)
            #expect(try await ledger.registry.addApp(Self.app, sharedSecret: nil))
            let handler = ledger.handler
            try await handler.defineProduct(try Product(productId: "pro.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                        subscriptionGroup: "pro", prices: ["USD": "9.99", "EUR": "8.99"]), app: Self.app)
            try await handler.defineProduct(try Product(productId: "max.year", type: .autoRenewable, duration: ISODuration(parsing: "P1Y"),
                                                        subscriptionGroup: "max", prices: ["USD": "99.99"]), app: Self.app)
            func periods(_ user: String, _ product: String, _ starts: [String], end: String, price: String, currency: String = "USD",
                         trial: Bool = false) async throws {
                let bounds = starts + [end]
                for index in starts.indices {
                    let transaction = TestTransaction("\(user)-\(index + 1)", product, original: "\(user)-1", purchased: Self.at(bounds[index]),
                                                      expires: Self.at(bounds[index + 1]), extra: trial ? ["is_trial_period": "true"] : [:])
                    try await AuditQueriesTests.record(handler, app: Self.app, user: user, (transaction, .production),
                                                       price: trial ? "0" : price, currency: currency)
                }
            }
            // A: three months from 10 January, then stops.
            try await periods("a", "pro.month", ["2026-01-10", "2026-02-10", "2026-03-10"], end: "2026-04-10", price: "9.99")
            // B (euros): a week's trial from 5 January, then paid monthly from 12 January to 12 May.
            try await periods("b", "pro.month", ["2026-01-05"], end: "2026-01-12", price: "0", currency: "EUR", trial: true)
            for (index, start) in ["2026-01-12", "2026-02-12", "2026-03-12", "2026-04-12"].enumerated() {
                let end = ["2026-02-12", "2026-03-12", "2026-04-12", "2026-05-12"][index]
                let transaction = TestTransaction("b-\(index + 2)", "pro.month", original: "b-1", purchased: Self.at(start), expires: Self.at(end))
                try await AuditQueriesTests.record(handler, app: Self.app, user: "b", (transaction, .production), price: "8.99", currency: "EUR")
            }
            // C: a trial in February that expires.
            try await periods("c", "pro.month", ["2026-02-01"], end: "2026-02-08", price: "0", trial: true)
            // D: a year from 20 January.
            try await periods("d", "max.year", ["2026-01-20"], end: "2027-01-20", price: "99.99")
            // E: January, a lapse, back from 15 March for a month.
            try await periods("e", "pro.month", ["2026-01-01"], end: "2026-02-01", price: "9.99")
            let back = TestTransaction("e-2", "pro.month", original: "e-1", purchased: Self.at("2026-03-15"), expires: Self.at("2026-04-15"))
            try await AuditQueriesTests.record(handler, app: Self.app, user: "e", (back, .production), price: "9.99", currency: "USD")
            // F: January, and a February renewal refunded on 5 February.
            try await periods("f", "pro.month", ["2026-01-03", "2026-02-03"], end: "2026-03-03", price: "9.99")
            _ = try await handler.execute(app: Self.app, user: "f") { state, _ in
                (try UserDecisions.revoke(transactionId: "f-2", revokedAt: Self.at("2026-02-05"), reason: "refund", on: state), ())
            }
            // G: March, then the App Store retries the renewal's charge with a billing grace period until 17 April.
            try await periods("g", "pro.month", ["2026-03-01"], end: "2026-04-01", price: "9.99")
            let retrying = ["original_transaction_id": "g-1", "auto_renew_status": "1", "is_in_billing_retry_period": "1",
                            "grace_period_expires_date_ms": String(Self.at("2026-04-17").milliseconds), "expiration_intent": "2"]
            _ = try await handler.execute(app: Self.app, user: "g") { state, _ in
                (try UserDecisions.observeReceipt(TestReceipts.answer([], renewalInfo: [retrying], receipt: "retry-g"), app: Self.app,
                                                  deviceId: "phone", digest: TestReceipts.digest, on: state).events, ())
            }
            try await AuditQueriesTests.catchUp(client, settings)

            let report = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.at("2026-01-01").addingTimeInterval(-43_200),
                                                          to: LedgerJSON.parseTimestamp("2026-05-01T00:00:00Z")!, byMonth: true)
            func figures(_ month: String, _ currency: String) -> String {
                guard let f = report.subscriptions.first(where: { $0.interval == month && $0.currency == currency }) else { return "-" }
                return "start \(f.activeAtStart) end \(f.activeAtEnd) mrr \(f.mrr) new \(f.new) renewed \(f.renewed) reactivated \(f.reactivated) "
                    + "churned \(f.churned) rate \(f.churnRate ?? "-") trials \(f.trialsStarted)/\(f.trialsConverted)/\(f.trialsExpired)"
            }
            // January: A, D, E, F new; all four active at its end; MRR 9.99 × 3 + 99.99 / 12 = 38.3025.
            #expect(figures("2026-01", "USD") == "start 0 end 4 mrr 38.3 new 4 renewed 0 reactivated 0 churned 0 rate - trials 0/0/0")
            // February: A renews; E lapses on 1 February and F's refunded renewal ends its service on 3 February: 2 of 4 churned.
            // C's trial starts and expires. Left: A and D, 9.99 + 8.3325.
            #expect(figures("2026-02", "USD") == "start 4 end 2 mrr 18.32 new 0 renewed 1 reactivated 0 churned 2 rate 0.5 trials 1/0/1")
            // March: A renews, E comes back, G starts; A, D, E, G active at its end: 38.3025.
            #expect(figures("2026-03", "USD") == "start 2 end 4 mrr 38.3 new 1 renewed 1 reactivated 1 churned 0 rate 0 trials 0/0/0")
            // April: A (10th), E (15th) and G, at the end of its grace period (17th), end: 3 of 4; D alone is left.
            #expect(figures("2026-04", "USD") == "start 4 end 1 mrr 8.33 new 0 renewed 0 reactivated 0 churned 3 rate 0.75 trials 0/0/0")
            // Euros: B's trial converts in January, then B renews every month.
            #expect(figures("2026-01", "EUR") == "start 0 end 1 mrr 8.99 new 1 renewed 0 reactivated 0 churned 0 rate - trials 1/1/0")
            #expect(figures("2026-03", "EUR") == "start 1 end 1 mrr 8.99 new 0 renewed 1 reactivated 0 churned 0 rate 0 trials 0/0/0")

            // In its grace period G is still a subscriber: active at the end of 16 April (with D), gone at the end of the 17th.
            let april = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.at("2026-04-16"),
                                                         to: Self.at("2026-04-18"), byMonth: false)
            #expect(april.subscriptions.filter { $0.currency == "USD" }.map { "\($0.interval) \($0.activeAtEnd) \($0.churned)" }
                == ["2026-04-16 2 0", "2026-04-17 1 1", "2026-04-18 1 0"])
            let rebuilt = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.at("2026-04-16"),
                                                           to: Self.at("2026-04-18"), byMonth: false, asOf: Date().addingTimeInterval(-0.001))
            #expect(rebuilt.subscriptions == april.subscriptions)

            // Refunds in February: A's and F's payments and C's trial (payment rows, as the summary counts them), F's refunded:
            // a third by count, half by amount.
            let february = try #require(report.refunds.first { $0.interval == "2026-02" && $0.currency == "USD" })
            #expect(february.payments == 3 && february.refunds == 1 && february.refundRateByCount == "0.3333" && february.refundRateByAmount == "0.5")
            #expect(february.basis == .live && february.closedAt == nil)

            // Cohorts: January's payers (A, D, E, F): 129.96 in their first month, then F's refund nets February to A's 9.99.
            let cohort = report.cohorts.filter { $0.cohort == "2026-01" && $0.currency == "USD" }.map { "\($0.monthsSince):\($0.net)" }
            #expect(cohort == ["0:129.96", "1:9.99", "2:19.98"])

            // As of 4 February: F's refund was not yet recorded... it was recorded now, so the past answers without it.
            let early = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: LedgerJSON.parseTimestamp("2026-01-01T00:00:00Z")!,
                                                         to: LedgerJSON.parseTimestamp("2026-05-01T00:00:00Z")!, byMonth: true,
                                                         asOf: Date().addingTimeInterval(-3_600))
            #expect(early.subscriptions.isEmpty && early.refunds.isEmpty, "an hour ago the log held none of these facts")
        }
    }
}

/// The figures of a generated history against a count written from the generator's own plan (not
/// from the ledger's rows): renewals straight on and a little late, lapses, product changes, trials
/// that convert and expire, refunds, family sharing, three currencies, and periods starting on the
/// very instant a month begins in UTC or in Paris; by month in both time zones and by day, from the
/// audit trail's judgements and rebuilt as of an instant.
@Suite struct SubscriptionMetricsGeneratedTests {
    static let app = "com.example.metrics-generated"

    /// SplitMix64: the same history on every run.
    struct Generator: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    struct Planned {
        let user: String
        let original: String
        let id: String
        let product: String
        let start: Date
        let end: Date
        let amount: Decimal
        let currency: String
        let trial: Bool
        var refunded = false
        var paid: Bool { !trial && !refunded && amount > 0 }
    }

    static let products: [(id: String, months: Int, weeks: Int, prices: [String: String])] = [
        ("pro.week", 0, 1, ["USD": "2.99", "EUR": "2.49", "JPY": "400"]),
        ("pro.month", 1, 0, ["USD": "9.99", "EUR": "8.99", "JPY": "1500"]),
        ("pro.year", 12, 0, ["USD": "99.99", "EUR": "89.99", "JPY": "15000"]),
    ]

    static func plan() -> [Planned] {
        var generator = Generator(state: 34)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        var paris = Calendar(identifier: .gregorian)
        paris.timeZone = TimeZone(identifier: "Europe/Paris")!
        var planned: [Planned] = []
        for user in 0..<60 {
            let currency = ["USD", "EUR", "JPY"][user % 3]
            let month = Int.random(in: 1...10, using: &generator)
            // A month's first instant in UTC, or in Paris, or the middle of a day.
            var start: Date
            switch user % 4 {
            case 0: start = calendar.date(from: DateComponents(year: 2025, month: month, day: 1))!
            case 1: start = paris.date(from: DateComponents(year: 2025, month: month, day: 1))!
            default: start = calendar.date(from: DateComponents(year: 2025, month: month, day: Int.random(in: 1...28, using: &generator), hour: 13))!
            }
            var product = Self.products[Int.random(in: 0...2, using: &generator)]
            let original = "g\(user)-1"
            var index = 1
            if user % 5 == 0 {
                let end = calendar.date(byAdding: .day, value: 7, to: start)!
                planned.append(Planned(user: "u\(user)", original: original, id: "g\(user)-\(index)", product: product.id, start: start, end: end,
                                       amount: 0, currency: currency, trial: true))
                index += 1
                // Some trials convert (at their end or within the day), some expire.
                start = user % 10 == 0 ? calendar.date(byAdding: .hour, value: 20, to: end)! : calendar.date(byAdding: .day, value: 3, to: end)!
            }
            for _ in 0..<Int.random(in: 1...7, using: &generator) {
                if Int.random(in: 0..<7, using: &generator) == 0 { product = Self.products[Int.random(in: 0...2, using: &generator)] }
                let end = product.weeks > 0 ? calendar.date(byAdding: .day, value: 7 * product.weeks, to: start)!
                    : calendar.date(byAdding: .month, value: product.months, to: start)!
                var period = Planned(user: "u\(user)", original: original, id: "g\(user)-\(index)", product: product.id, start: start, end: end,
                                     amount: Decimal(string: product.prices[currency]!)!, currency: currency, trial: false)
                period.refunded = Int.random(in: 0..<12, using: &generator) == 0
                planned.append(period)
                index += 1
                switch Int.random(in: 0..<10, using: &generator) {
                case 0: start = calendar.date(byAdding: .day, value: 20, to: end)!   // a lapse
                case 1: start = calendar.date(byAdding: .hour, value: 6, to: end)!   // charged a little late
                default: start = end
                }
            }
        }
        return planned
    }

    /// The figures counted from the plan, in the form the report prints them, by interval and currency.
    static func count(_ planned: [Planned], intervals: [SubscriptionMetrics.Interval], asOf: Date) -> [String: String] {
        let continuity: TimeInterval = 86_400
        func bucket(_ date: Date) -> String? {
            guard date < asOf else { return nil }
            return intervals.first { $0.start <= date && date < $0.end }?.label
        }
        struct Counts { var new = 0, reactivated = 0, continuing = 0, churned = 0, start = 0, end = 0, trials = 0, converted = 0, expired = 0 }
        var counts: [String: [String: Counts]] = [:]
        func add(_ label: String?, _ currency: String, _ change: (inout Counts) -> Void) {
            guard let label else { return }
            change(&counts[label, default: [:]][currency, default: Counts()])
        }
        let monthsOf = Dictionary(uniqueKeysWithValues: Self.products.map {
            ($0.id, $0.weeks > 0 ? Decimal(7 * $0.weeks) / Decimal(string: "30.436875")! : Decimal($0.months))
        })
        // Each product's amounts added up before they are divided by its months, as exactly as can be.
        var recurring: [String: [String: Decimal]] = [:]
        for (_, periods) in Dictionary(grouping: planned, by: \.original) {
            let paid = periods.filter(\.paid).sorted { $0.start < $1.start }
            var stretches: [[Planned]] = []
            for period in paid {
                if let last = stretches.last, period.start <= last.map(\.end).max()!.addingTimeInterval(continuity) {
                    stretches[stretches.count - 1].append(period)
                } else {
                    stretches.append([period])
                }
            }
            for (index, stretch) in stretches.enumerated() {
                add(bucket(stretch[0].start), stretch[0].currency) { if index == 0 { $0.new += 1 } else { $0.reactivated += 1 } }
                for period in stretch.dropFirst() { add(bucket(period.start), period.currency) { $0.continuing += 1 } }
                let end = stretch.map(\.end).max()!
                if end.addingTimeInterval(continuity) < asOf { add(bucket(end), stretch.last!.currency) { $0.churned += 1 } }
                // Active at an instant: the stretch's start < it ≤ the stretch's end.
                func current(at instant: Date) -> Planned? {
                    guard stretch[0].start < instant, instant <= end else { return nil }
                    return stretch.last { $0.start < instant }
                }
                for interval in intervals {
                    if let period = current(at: interval.start) { add(interval.label, period.currency) { $0.start += 1 } }
                    if let period = current(at: interval.end) {
                        add(interval.label, period.currency) { $0.end += 1 }
                        recurring["\(interval.label) \(period.currency)", default: [:]][period.product, default: 0] += period.amount
                    }
                }
            }
            for trial in periods where trial.trial {
                add(bucket(trial.start), trial.currency) { $0.trials += 1 }
                if let converting = paid.first(where: { $0.start >= trial.start && $0.start <= trial.end.addingTimeInterval(continuity) }) {
                    add(bucket(converting.start), trial.currency) { $0.converted += 1 }
                } else if trial.end.addingTimeInterval(continuity) < asOf {
                    add(bucket(trial.end), trial.currency) { $0.expired += 1 }
                }
            }
        }
        var result: [String: String] = [:]
        for (label, currencies) in counts {
            for (currency, c) in currencies {
                var rounded = Decimal()
                var mrr = (recurring["\(label) \(currency)"] ?? [:]).reduce(Decimal(0)) { $0 + $1.value / monthsOf[$1.key]! }
                NSDecimalRound(&rounded, &mrr, 2, .plain)
                result["\(label) \(currency)"] = "start \(c.start) end \(c.end) mrr \(rounded) new \(c.new) reactivated \(c.reactivated) "
                    + "continuing \(c.continuing) churned \(c.churned) trials \(c.trials)/\(c.converted)/\(c.expired)"
            }
        }
        return result
    }

    static func printed(_ figures: [SubscriptionMetrics.Figures]) -> [String: String] {
        Dictionary(uniqueKeysWithValues: figures.map { f in
            ("\(f.interval) \(f.currency)",
             "start \(f.activeAtStart) end \(f.activeAtEnd) mrr \(f.mrr) new \(f.new) reactivated \(f.reactivated) "
                + "continuing \(f.renewed + f.upgraded + f.crossgraded) churned \(f.churned) trials \(f.trialsStarted)/\(f.trialsConverted)/\(f.trialsExpired)")
        })
    }

    @Test func aGeneratedHistoryMatchesACountFromItsPlanByMonthInUTCAndParisAndByDay() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let ledger = PostgresLedger(client: client, logger: TestDatabase.logger)
            #expect(try await ledger.registry.addApp(Self.app, sharedSecret: nil))
            let handler = ledger.handler
            for product in Self.products {
                let duration = product.weeks > 0 ? "P\(product.weeks)W" : product.months == 12 ? "P1Y" : "P\(product.months)M"
                try await handler.defineProduct(try Product(productId: product.id, type: .autoRenewable, duration: ISODuration(parsing: duration),
                                                            subscriptionGroup: "pro", prices: product.prices), app: Self.app)
            }
            let planned = Self.plan()
            for period in planned {
                let transaction = TestTransaction(period.id, period.product, original: period.original, purchased: period.start, expires: period.end,
                                                  extra: period.trial ? ["is_trial_period": "true"] : [:])
                try await AuditQueriesTests.record(handler, app: Self.app, user: period.user, (transaction, .production),
                                                   price: "\(period.amount)", currency: period.currency)
                if period.refunded {
                    _ = try await handler.execute(app: Self.app, user: period.user) { state, _ in
                        (try UserDecisions.revoke(transactionId: period.id, revokedAt: period.start.addingTimeInterval(3 * 86_400),
                                                  reason: "refund", on: state), ())
                    }
                }
            }
            // Family members' access: no money, no figure.
            for user in stride(from: 1, to: 60, by: 7) {
                let shared = TestTransaction("family-\(user)", "pro.month", purchased: TestTransaction.defaultDate,
                                             expires: TestTransaction.defaultDate.addingTimeInterval(30 * 86_400),
                                             extra: ["in_app_ownership_type": "FAMILY_SHARED"])
                let currency = ["USD", "EUR", "JPY"][user % 3]
                try await AuditQueriesTests.record(handler, app: Self.app, user: "u\(user)", (shared, .production),
                                                   price: Self.products[1].prices[currency], currency: currency)
            }
            try await AuditQueriesTests.catchUp(client, settings)
            #expect(planned.contains { $0.refunded } && planned.contains { $0.trial } && Set(planned.map(\.product)).count == 3)

            // The present is added up from the audit trail's judgements (not rebuilt from the rows, as the past is).
            let now = Date()
            let groups = try await PostgresMetrics(client: client, logger: TestDatabase.logger).serviceGroups(
                app: Self.app, environment: .production, points: [TestTransaction.defaultDate, now], before: now, asOf: now)
            #expect(groups.reduce(0) { $0 + $1.rows } == planned.count { ($0.trial || !$0.refunded) && $0.start < now })
            let year = (LedgerJSON.parseTimestamp("2025-01-01T00:00:00Z")!, LedgerJSON.parseTimestamp("2026-03-01T00:00:00Z")!)
            let days = (LedgerJSON.parseTimestamp("2025-03-01T00:00:00Z")!, LedgerJSON.parseTimestamp("2026-01-01T00:00:00Z")!)
            for (zone, byMonth) in [("UTC", true), ("Europe/Paris", true), ("UTC", false)] {
                let (from, to) = byMonth ? year : days
                let present = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: from, to: to, byMonth: byMonth,
                                                               timeZone: zone)
                // The last month ends at `to`: in Paris, an hour into March.
                let intervals = SubscriptionMetrics.intervals(from: from, to: to, byMonth: byMonth, timeZone: TimeZone(identifier: zone)!,
                                                              until: present.asOf)
                let expected = Self.count(planned, intervals: intervals, asOf: present.asOf)
                #expect(expected.count > (byMonth ? 20 : 200), "\(zone) by \(byMonth ? "month" : "day"): \(expected.count) figures")
                let figures = Self.printed(present.subscriptions)
                for key in Set(expected.keys).union(figures.keys).sorted() where expected[key] != figures[key] {
                    Issue.record("\(zone) \(key): counted \(expected[key] ?? "nothing"), the ledger says \(figures[key] ?? "nothing")")
                }
                // Rebuilt from the rows as of an instant after all of it: the same figures.
                let past = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: from, to: to, byMonth: byMonth,
                                                            timeZone: zone, asOf: present.asOf.addingTimeInterval(-0.001))
                #expect(Self.printed(past.subscriptions) == figures)
                #expect(past.cohorts == present.cohorts && past.refunds == present.refunds)
            }
        }
    }
}
