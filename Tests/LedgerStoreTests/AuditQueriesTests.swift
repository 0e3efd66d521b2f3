import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

@Suite("Finance reads the audit trail: filters, pages, totals, catalog gaps and CSV")
struct AuditQueriesTests {
    static let appA = "com.example.a"
    static let appB = "com.example.b"
    /// A device id and a product id that CSV must quote.
    static let oddDevice = "ipad, \"pro\"\r\nline 2\nline 3"
    static let oddProduct = "odd,\"name\""

    static func date(_ text: String) -> Date { LedgerJSON.parseTimestamp(text)! }

    /// A transaction as the App Store lists it, in the environment that answered.
    static func purchase(
        _ id: String, _ product: String, quantity: Int = 1, at time: String, expires: String? = nil,
        original: String? = nil, environment: StoreEnvironment = .production
    ) -> (TestTransaction, StoreEnvironment) {
        (TestTransaction(id, product, original: original, quantity: quantity, purchased: date(time), expires: expires.map(date)), environment)
    }

    static func record(
        _ handler: UserCommandHandler, app: String, user: String, device: String = "phone",
        _ transaction: (TestTransaction, StoreEnvironment), price: String? = nil, currency: String? = nil
    ) async throws {
        _ = try await handler.execute(app: app, user: user) { state, _ in
            let decision = try TestReceipts.observe([transaction.0], app: app, device: device, price: price, currency: currency,
                                                    environment: transaction.1, on: state)
            return (decision.events, ())
        }
    }

    /// App A: priced purchases in two currencies, a refund, a sandbox purchase, a renewal priced by
    /// the catalog, and two
    /// products the catalog does not know (one bought on a device whose id needs CSV quoting).
    /// App B: one purchase by a user with the same id as one of A's.
    static func seed(_ client: DatabasePool) async throws -> UserCommandHandler {
        let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
        for app in [appA, appB] {
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable), app: app)
        }
        try await handler.defineProduct(try Product(productId: "levels", type: .nonConsumable), app: appA)
        // The renewal t8 is priced from the catalog: the device reports the price of what it bought, not of renewals.
        try await handler.defineProduct(try Product(productId: "gold.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                    prices: ["USD": "2.99"]), app: appA)

        try await record(handler, app: appA, user: "u1", purchase("t1", "coins", quantity: 3, at: "2026-01-01T10:00:00Z"), price: "0.99", currency: "USD")
        try await record(handler, app: appA, user: "u1", purchase("t2", "levels", at: "2026-01-02T10:00:00Z"), price: "4.99", currency: "USD")
        _ = try await handler.execute(app: appA, user: "u1") { state, _ in
            (try UserDecisions.revoke(transactionId: "t2", revokedAt: date("2026-01-03T09:00:00Z"), reason: "refund", on: state), ())
        }
        try await record(handler, app: appA, user: "u2", purchase("t3", "coins", at: "2026-01-01T12:00:00Z"), price: "1.09", currency: "EUR")
        try await record(handler, app: appA, user: "u2", purchase("t4", "coins", quantity: 2, at: "2026-01-02T11:00:00Z", environment: .sandbox),
                         price: "0.99", currency: "USD")
        try await record(handler, app: appA, user: "u3", purchase("t5", "mystery", at: "2026-01-02T08:00:00Z"))
        try await record(handler, app: appA, user: "u3", device: oddDevice, purchase("t6", oddProduct, at: "2026-01-02T09:00:00Z"))
        try await record(handler, app: appA, user: "u4", purchase("t7", "gold.month", at: "2026-01-05T00:00:00Z", expires: "2026-02-05T00:00:00Z"),
                         price: "2.99", currency: "USD")
        try await record(handler, app: appA, user: "u4", purchase("t8", "gold.month", at: "2026-02-05T00:00:00Z", expires: "2026-03-05T00:00:00Z",
                                                                   original: "t7"),
                         price: "2.99", currency: "USD")
        try await record(handler, app: appB, user: "u1", purchase("b1", "coins", at: "2026-01-01T10:00:00Z"), price: "0.99", currency: "USD")
        return handler
    }

    /// Runs the projections until every one has applied the whole log.
    static func catchUp(_ client: DatabasePool, _ settings: DatabaseSettings) async throws {
        let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
        let runner = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                      batchSize: 25, pollInterval: .milliseconds(50), logger: TestDatabase.logger)
        #expect(try await ProjectionRunnerTests.runUntilCaughtUp(runner, client, head: head))
    }

    /// Every row of both environments.
    static let everything = AuditFilter(environment: .all)

    static func keys(_ rows: [AuditRow]) -> [String] {
        rows.map { "\($0.transactionId)/\($0.event.rawValue)" }
    }

    static func all(_ queries: AuditQueries, _ filter: AuditFilter, app: String = appA) async throws -> Set<String> {
        Set(keys(try await queries.events(app: app, filter: filter, limit: 1_000).rows))
    }

    @Test("rows carry what finance needs: occurred_at is the purchase date, or the refund date for a refund; amount = price × quantity")
    func rowsAndOccurredAt() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            let rows = try await queries.events(app: Self.appA, filter: Self.everything, limit: 100).rows
            #expect(Self.keys(rows) == ["t1/purchase", "t2/purchase", "t2/refund", "t3/purchase", "t4/purchase", "t5/purchase",
                                        "t6/purchase", "t7/purchase", "t8/renewal"])
            let t1 = try #require(rows.first { $0.transactionId == "t1" })
            #expect(t1.occurredAt == Self.date("2026-01-01T10:00:00Z"))
            #expect(t1.price == "0.99" && t1.amount == "2.97" && t1.currency == "USD" && t1.quantity == 3 && t1.userId == "u1")
            #expect(t1.productType == .consumable && t1.environment == .production && !t1.revoked && t1.deviceId == "phone")
            let bought = try #require(rows.first { $0.transactionId == "t2" && $0.event == .purchase })
            let refund = try #require(rows.first { $0.transactionId == "t2" && $0.event == .refund })
            #expect(bought.occurredAt == Self.date("2026-01-02T10:00:00Z") && bought.revoked)
            #expect(refund.occurredAt == Self.date("2026-01-03T09:00:00Z") && refund.revoked && refund.amount == "4.99")
            // The refund's recorded_at is when the ledger recorded the revocation, not the refund date.
            let refundRecorded = try #require(refund.recordedAt)
            #expect(refundRecorded != refund.occurredAt && refundRecorded >= (bought.recordedAt ?? .distantFuture))
            let renewal = try #require(rows.first { $0.event == .renewal })
            #expect(renewal.originalTransactionId == "t7" && renewal.expiresDate == Self.date("2026-03-05T00:00:00Z"))
            let unpriced = try #require(rows.first { $0.transactionId == "t5" })
            #expect(unpriced.price == nil && unpriced.amount == nil && unpriced.productType == .unknown)
            // App B sees only its own row.
            #expect(Self.keys(try await queries.events(app: Self.appB).rows) == ["b1/purchase"])
        }
    }

    @Test("each filter selects exactly its rows; from/to is half-open on occurred_at")
    func filters() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            // t2's purchase at 10:00 on the 2nd is in; its refund on the 3rd is out; t4 at 11:00 is sandbox's.
            #expect(try await Self.all(queries, AuditFilter(from: Self.date("2026-01-02T00:00:00Z"), to: Self.date("2026-01-03T00:00:00Z")))
                    == ["t2/purchase", "t5/purchase", "t6/purchase"])
            // Half-open: a row exactly at `to` is out, exactly at `from` is in.
            #expect(try await Self.all(queries, AuditFilter(from: Self.date("2026-01-01T10:00:00Z"), to: Self.date("2026-01-01T12:00:00Z")))
                    == ["t1/purchase"])
            #expect(try await Self.all(queries, AuditFilter(from: Self.date("2026-01-03T09:00:00Z"))) == ["t2/refund", "t7/purchase", "t8/renewal"])
            #expect(try await Self.all(queries, AuditFilter(events: [.refund])) == ["t2/refund"])
            #expect(try await Self.all(queries, AuditFilter(events: [.renewal, .refund])) == ["t2/refund", "t8/renewal"])
            #expect(try await Self.all(queries, AuditFilter(productId: "coins")) == ["t1/purchase", "t3/purchase"])
            #expect(try await Self.all(queries, AuditFilter(productId: "coins", environment: .all)) == ["t1/purchase", "t3/purchase", "t4/purchase"])
            #expect(try await Self.all(queries, AuditFilter(userId: "u1")) == ["t1/purchase", "t2/purchase", "t2/refund"])
            #expect(try await Self.all(queries, AuditFilter(environment: .sandbox)) == ["t4/purchase"])
            #expect(try await Self.all(queries, AuditFilter(events: [.purchase], productId: "coins", environment: .production))
                    == ["t1/purchase", "t3/purchase"])
            #expect(try await Self.all(queries, AuditFilter(userId: "u1"), app: Self.appB) == ["b1/purchase"])

            let reversed = AuditFilter(from: Self.date("2026-01-03T00:00:00Z"), to: Self.date("2026-01-02T00:00:00Z"))
            let error = await #expect(throws: AuditQueryError.self) { try await queries.events(app: Self.appA, filter: reversed) }
            #expect(error?.code == .invalidFilter && error?.field == "from")
            #expect(throws: AuditQueryError.invalidFilter(field: "type", "'sale' is not an audit event type: use purchase, renewal or refund, comma-separated")) {
                try AuditEventKind.parse(list: "purchase,sale")
            }
            #expect(try AuditEventKind.parse(list: "refund,purchase,refund") == [.refund, .purchase])
            await #expect(throws: AuditQueryError.invalidLimit(0, maximum: AuditQueries.maximumPageSize)) {
                try await queries.events(app: Self.appA, limit: 0)
            }
        }
    }

    @Test("paging with a cursor returns every row exactly once, in order; a cursor works only for its own app")
    func pagination() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            let everything = try await queries.events(app: Self.appA, filter: Self.everything, limit: 100)
            #expect(everything.nextCursor == nil && everything.rows.count == 9)

            var paged: [AuditRow] = []
            var cursor: AuditCursor?
            var pages = 0
            repeat {
                // Through the text form, as a client would send it back.
                let page = try await queries.events(app: Self.appA, filter: Self.everything,
                                                    after: try cursor.map { try AuditCursor(parsing: $0.text, app: Self.appA) }, limit: 2)
                #expect(page.rows.count <= 2)
                paged += page.rows
                cursor = page.nextCursor
                pages += 1
            } while cursor != nil && pages < 20
            #expect(pages == 5)
            #expect(paged == everything.rows)
            #expect(zip(paged, paged.dropFirst()).allSatisfy { ($0.position, $0.event.rawValue) < ($1.position, $1.event.rawValue) })

            var streamed: [AuditRow] = []
            let count = try await queries.forEachEvent(app: Self.appA, filter: Self.everything, pageSize: 4) { streamed.append($0) }
            #expect(streamed == everything.rows && count == 9)
            var filtered: [String] = []
            try await queries.forEachEvent(app: Self.appA, filter: AuditFilter(productId: "coins", environment: .all), pageSize: 1) { filtered.append($0.transactionId) }
            #expect(filtered == ["t1", "t3", "t4"])

            // A cursor of app A is refused for app B, as text and as a value.
            let first = try #require(try await queries.events(app: Self.appA, limit: 2).nextCursor)
            #expect(first.text.allSatisfy { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" })
            let foreign = #expect(throws: AuditQueryError.self) { try AuditCursor(parsing: first.text, app: Self.appB) }
            #expect(foreign?.code == .invalidCursor && foreign?.field == "cursor")
            let foreignValue = await #expect(throws: AuditQueryError.self) { try await queries.events(app: Self.appB, after: first) }
            #expect(foreignValue?.code == .invalidCursor)
            // Garbage: not base64url, base64url of not-JSON, JSON of another shape, empty.
            let jsonOfAnotherShape = Data(#"{"x":1}"#.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            for garbage in ["not a cursor!", "AAAA", jsonOfAnotherShape, "", String(first.text.dropLast(3))] {
                let error = #expect(throws: AuditQueryError.self) { try AuditCursor(parsing: garbage, app: Self.appA) }
                #expect(error?.code == .invalidCursor, "\(garbage)")
            }
        }
    }

    @Test("totals never mix currencies; refunds and sandbox are kept apart; net = gross − refunded")
    func summary() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)

            // Currency alone (always a key), production only: USD has t1 2.97, t2 4.99, t7 2.99, t8 2.99 (t4 is sandbox's).
            #expect(try await queries.summary(app: Self.appA) == [
                AuditSummaryRow(day: nil, productId: nil, currency: "EUR", environment: nil, purchases: 1, units: 1, gross: "1.09",
                                refunds: 0, refundedUnits: 0, refundedAmount: "0", net: "1.09", unpriced: 0, proceedsUnknown: 1),
                AuditSummaryRow(day: nil, productId: nil, currency: "USD", environment: nil, purchases: 4, units: 6, gross: "13.94",
                                refunds: 1, refundedUnits: 1, refundedAmount: "4.99", net: "8.95", unpriced: 0, proceedsUnknown: 5),
                AuditSummaryRow(day: nil, productId: nil, currency: nil, environment: nil, purchases: 2, units: 2, gross: "0",
                                refunds: 0, refundedUnits: 0, refundedAmount: "0", net: "0", unpriced: 2, proceedsUnknown: 2),
            ])

            let byEnvironment = try await queries.summary(app: Self.appA, filter: AuditFilter(environment: .all), groupBy: [.environment, .currency])
            let usdProduction = try #require(byEnvironment.first { $0.currency == "USD" && $0.environment == .production })
            let usdSandbox = try #require(byEnvironment.first { $0.currency == "USD" && $0.environment == .sandbox })
            #expect(usdProduction.purchases == 4 && usdProduction.gross == "13.94" && usdProduction.net == "8.95" && usdProduction.refunds == 1)
            #expect(usdSandbox.purchases == 1 && usdSandbox.units == 2 && usdSandbox.gross == "1.98" && usdSandbox.refunds == 0)
            #expect(byEnvironment.count == 4)

            // By day and product, production only: the refund is on the day it happened, on its own.
            let daily = try await queries.summary(app: Self.appA, filter: AuditFilter(environment: .production), groupBy: [.day, .product])
            let refundDay = try #require(daily.first { $0.day == "2026-01-03" })
            #expect(refundDay == AuditSummaryRow(day: "2026-01-03", productId: "levels", currency: "USD", environment: nil, purchases: 0,
                                                 units: 0, gross: "0", refunds: 1, refundedUnits: 1, refundedAmount: "4.99", net: "-4.99",
                                                 unpriced: 0, proceedsUnknown: 1))
            #expect(daily.map { "\($0.day ?? "-") \($0.productId ?? "-") \($0.currency ?? "-")" } == [
                "2026-01-01 coins EUR", "2026-01-01 coins USD", "2026-01-02 levels USD", "2026-01-02 mystery -",
                "2026-01-02 \(Self.oddProduct) -", "2026-01-03 levels USD", "2026-01-05 gold.month USD", "2026-02-05 gold.month USD",
            ])
            #expect(daily.allSatisfy { $0.environment == nil })
            // Filters apply to totals too.
            #expect(try await queries.summary(app: Self.appA, filter: AuditFilter(events: [.renewal])).map(\.gross) == ["2.99"])
            #expect(try await queries.summary(app: Self.appB).map(\.gross) == ["0.99"])
        }
    }

    @Test("a payment after a year of paid service is past a year; free trials, refunded periods and lapses over 60 days do not count")
    func yearOfPaidService() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
            let app = "com.example.subs"
            try await handler.defineProduct(try Product(productId: "pro.month", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                        prices: ["USD": "4.99"]), app: app)
            var calendar = Calendar(identifier: .gregorian)
            calendar.timeZone = TimeZone(identifier: "UTC")!
            func day(_ text: String) -> Date { Self.date(text + "T12:00:00Z") }
            /// Monthly periods of one subscription from `start`, `count` of them; ids `<user>-<n>` go on from `first`.
            func months(_ user: String, from start: String, count: Int, first: Int = 1, trialFirst: Bool = false) async throws {
                for index in 0..<count {
                    let begins = calendar.date(byAdding: .month, value: index, to: day(start))!
                    let ends = calendar.date(byAdding: .month, value: index + 1, to: day(start))!
                    let trial = trialFirst && index == 0 && first == 1
                    let transaction = TestTransaction("\(user)-\(first + index)", "pro.month", original: "\(user)-1", purchased: begins, expires: ends,
                                                      extra: trial ? ["is_trial_period": "true"] : [:])
                    try await Self.record(handler, app: app, user: user, (transaction, .production), price: trial ? "0" : "4.99", currency: "USD")
                }
            }
            // 13 monthly payments: the 13th comes after 365 days of paid service.
            try await months("year", from: "2025-01-01", count: 13)
            // A free month first: the 13th payment is the first after a paid year.
            try await months("trial", from: "2025-01-01", count: 14, trialFirst: true)
            // Six months, 92 days without, then ten: the count starts again.
            try await months("long", from: "2025-01-01", count: 6)
            try await months("long", from: "2025-10-01", count: 10, first: 7)
            // Six months, 30 days without, then seven: the count goes on.
            try await months("short", from: "2025-01-01", count: 6)
            try await months("short", from: "2025-07-31", count: 7, first: 7)
            // Thirteen payments, the third refunded: 31 days fewer.
            try await months("refunded", from: "2025-01-01", count: 13)
            _ = try await handler.execute(app: app, user: "refunded") { state, _ in
                (try UserDecisions.revoke(transactionId: "refunded-3", revokedAt: day("2025-03-10"), reason: "refund", on: state), ())
            }
            try await Self.catchUp(client, settings)
            var pastAYear: [String: Bool] = [:]
            try await AuditQueries(client: client, logger: TestDatabase.logger).forEachEvent(app: app, pageSize: 7) { row in
                if row.event != .refund { pastAYear[row.transactionId] = row.basis?.pastAYear }
            }
            let payments = 13 + 14 + 16 + 13 + 13
            #expect(pastAYear.count == payments)
            // year: 12 paid months (365 days) before the 13th. trial: 13th payment at 2026-01-01 has 11 paid months (334 days) before it,
            // the 14th has 365. long: 181 days, a 92-day lapse, then at most 9 months (273 days): never. short: 181 + 30-day lapse + 184
            // days (2025-07-31 to 2026-01-31) before short-13. refunded: 365 − 31 = 334 before refunded-13: not yet.
            let past: [String] = pastAYear.filter(\.value).keys.sorted()
            #expect(past == ["short-13", "trial-14", "year-13"])
        }
    }

    @Test("with no environment, rows and totals are production's; sandbox only when asked; all is always shown per environment")
    func environments() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            let production = try await Self.all(queries, AuditFilter())
            #expect(!production.isEmpty && !production.contains("t4/purchase"), "the sandbox purchase stays out unasked")
            #expect(try await queries.events(app: Self.appA).rows.allSatisfy { $0.environment == .production })
            #expect(try await Self.all(queries, AuditFilter(environment: .sandbox)) == ["t4/purchase"])
            #expect(try await Self.all(queries, AuditFilter(environment: .all)) == production.union(["t4/purchase"]))

            let totals = try await queries.summary(app: Self.appA)
            #expect(totals.first { $0.currency == "USD" }?.gross == "13.94", "sandbox's 1.98 is not revenue")
            let sandbox = try await queries.summary(app: Self.appA, filter: AuditFilter(environment: .sandbox))
            #expect(sandbox.map(\.gross) == ["1.98"])
            // Asked for all but grouped by currency only: still one row per environment, never a sum of both.
            let both = try await queries.summary(app: Self.appA, filter: AuditFilter(environment: .all), groupBy: [.currency])
            #expect(both.allSatisfy { $0.environment != nil })
            #expect(both.filter { $0.currency == "USD" }.map(\.gross).sorted() == ["1.98", "13.94"])
        }
    }

    @Test("an unknown product is listed until the catalog defines it and the projections catch up")
    func unclassified() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = try await Self.seed(client)
            try await Self.record(handler, app: Self.appA, user: "u5", Self.purchase("t9", "mystery", quantity: 4, at: "2026-01-04T00:00:00Z"))
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            #expect(try await queries.unclassified(app: Self.appA) == [
                UnclassifiedProduct(productId: "mystery", transactions: 2, units: 5, users: 2,
                                    firstPurchase: Self.date("2026-01-02T08:00:00Z"), lastPurchase: Self.date("2026-01-04T00:00:00Z")),
                UnclassifiedProduct(productId: Self.oddProduct, transactions: 1, units: 1, users: 1,
                                    firstPurchase: Self.date("2026-01-02T09:00:00Z"), lastPurchase: Self.date("2026-01-02T09:00:00Z")),
            ])
            #expect(try await queries.unclassified(app: Self.appB).isEmpty)

            try await handler.defineProduct(try Product(productId: "mystery", type: .consumable), app: Self.appA)
            try await Self.catchUp(client, settings)
            #expect(try await queries.unclassified(app: Self.appA).map(\.productId) == [Self.oddProduct])
            let reclassified = try await queries.events(app: Self.appA, filter: AuditFilter(productId: "mystery")).rows
            #expect(reclassified.count == 2 && reclassified.allSatisfy { $0.productType == .consumable })
        }
    }

    @Test("CSV: ids that a spreadsheet would run as formulas are written as text; amounts, negative ones too, stay numbers")
    func csvFormulaInjection() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable), app: Self.appA)
            let hostile = ["=HYPERLINK(\"http://x\")", "+1+1", "-2+3", "@SUM(A1)"]
            for (index, user) in hostile.enumerated() {
                try await Self.record(handler, app: Self.appA, user: user, device: "\t=cmd", Self.purchase("x\(index)", "coins", at: "2026-01-01T10:00:00Z"),
                                      price: "0.99", currency: "USD")
                _ = try await handler.execute(app: Self.appA, user: user) { state, _ in
                    (try UserDecisions.revoke(transactionId: "x\(index)", revokedAt: Self.date("2026-01-02T00:00:00Z"), reason: "refund", on: state), ())
                }
            }
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            var csv = AuditCSV.header
            try await queries.forEachEvent(app: Self.appA) { csv += AuditCSV.line($0) }
            let records = try CSVReader.parse(csv)
            let header = records[0]
            let users = records.dropFirst().map { $0[header.firstIndex(of: "user_id")!] }
            #expect(Set(users) == Set(hostile.map { "'" + $0 }), "\(users)")
            #expect(records.dropFirst().allSatisfy { $0[header.firstIndex(of: "device_id")!] == "'\t=cmd" })
            // The JSON rows keep the ids as recorded.
            #expect(Set(try await queries.events(app: Self.appA).rows.map(\.userId)) == Set(hostile))
            // A negative net is a number, not text.
            let summary = AuditCSV.summaryHeader + (try await queries.summary(app: Self.appA, groupBy: [.day])).map(AuditCSV.line).joined()
            #expect(summary.contains(",-3.96,"), "\(summary)")
        }
    }

    @Test("CSV: quoted fields with commas, quotes and line breaks read back exactly (RFC 4180)")
    func csvRoundTrip() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            try await Self.catchUp(client, settings)
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            var csv = AuditCSV.header
            try await queries.forEachEvent(app: Self.appA, filter: Self.everything, pageSize: 3) { csv += AuditCSV.line($0) }
            let records = try CSVReader.parse(csv)
            #expect(records.count == 10)
            #expect(records.allSatisfy { $0.count == 27 })
            let header = records[0]
            let odd = try #require(records.dropFirst().first { $0[header.firstIndex(of: "transaction_id")!] == "t6" })
            #expect(odd[header.firstIndex(of: "device_id")!] == Self.oddDevice)
            #expect(odd[header.firstIndex(of: "product_id")!] == Self.oddProduct)
            #expect(odd[header.firstIndex(of: "price")!] == "")
            #expect(odd[header.firstIndex(of: "price_source")!] == "none")
            let t1 = try #require(records.dropFirst().first { $0[header.firstIndex(of: "transaction_id")!] == "t1" })
            #expect(t1[header.firstIndex(of: "amount")!] == "2.97")
            #expect(t1[header.firstIndex(of: "occurred_at")!] == "2026-01-01T10:00:00.000Z")
            #expect(t1[header.firstIndex(of: "revoked")!] == "false")
            #expect(t1[header.firstIndex(of: "price_source")!] == "device" && t1[header.firstIndex(of: "offer")!] == "none")
            let renewal = try #require(records.dropFirst().first { $0[header.firstIndex(of: "transaction_id")!] == "t8" })
            #expect(renewal[header.firstIndex(of: "price_source")!] == "catalog" && renewal[header.firstIndex(of: "price")!] == "2.99")
            // Only the quoted fields hold bare line breaks; every record ends in CRLF.
            #expect(csv.hasSuffix("\r\n"))
            #expect(csv.contains("\"ipad, \"\"pro\"\"\r\nline 2\nline 3\""))
        }
    }

    @Test("a ledger with audit_trail v1 live builds v2 beside it and switches; until then the queries say not ready")
    func upgradeFromVersion1() async throws {
        try await TestDatabase.withDatabase { client, settings in
            _ = try await Self.seed(client)
            let head = try await PostgresEventStore(client: client, logger: TestDatabase.logger).headPosition()
            let old = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                       projections: [AuditTrailVersion1.self], pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            #expect(try await ProjectionRunnerTests.runUntil(old) {
                try await ProjectionRunnerTests.checkpoint(AuditTrailVersion1.self, client) == (head, "live", nil)
            })
            let queries = AuditQueries(client: client, logger: TestDatabase.logger)
            await #expect(throws: AuditQueryError.notReady) { try await queries.events(app: Self.appA) }

            let new = ProjectionRunner(client: client, listenConfiguration: try settings.connectionConfiguration,
                                       projections: [AuditTrailProjection.self], pollInterval: .milliseconds(50), logger: TestDatabase.logger)
            #expect(try await ProjectionRunnerTests.runUntil(new) {
                let (position, status, _) = try await ProjectionRunnerTests.checkpoint(AuditTrailProjection.self, client)
                return position >= head && status == "live"
            })
            #expect(try await ProjectionRunnerTests.checkpoint(AuditTrailVersion1.self, client).1 == "retired")
            #expect(try await queries.events(app: Self.appA, filter: Self.everything).rows.count == 9)
        }
    }

    @Test("CSV fields are quoted only when RFC 4180 needs it; data stays exact")
    func csvFields() {
        #expect(AuditCSV.field("plain") == "plain")
        #expect(AuditCSV.field("") == "")
        #expect(AuditCSV.field("a,b") == "\"a,b\"")
        #expect(AuditCSV.field("say \"hi\"") == "\"say \"\"hi\"\"\"")
        #expect(AuditCSV.field("cr\rlf\n") == "\"cr\rlf\n\"")
        #expect(AuditCSV.field("=SUM(A1)") == "=SUM(A1)")
        #expect(AuditCSV.line(["a", nil, "b,c"]) == "a,,\"b,c\"\r\n")
    }
}

/// The audit trail as version 1 had it: no occurred_at.
enum AuditTrailVersion1: UserProjection {
    static let name = AuditTrailProjection.name
    static let version = 1
    static let columns = AuditTrailProjection.columns.filter { $0.name != "occurred_at" }
    static let keyColumns = AuditTrailProjection.keyColumns

    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [TextRow] {
        let occurred = AuditTrailProjection.columns.firstIndex { $0.name == "occurred_at" }!
        return AuditTrailProjection.columnValues(app: app, user: user, state: state, catalog: catalog).map { row in
            var row = row
            row.remove(at: occurred)
            return TextRow(columnValues: row)
        }
    }
}

/// A strict RFC 4180 reader for the tests.
enum CSVReader {
    struct Malformed: Error {}

    static func parse(_ text: String) throws -> [[String]] {
        var records: [[String]] = []
        var record: [String] = []
        var field = ""
        var scalars = Array(text.unicodeScalars)[...]
        var quoted = false
        var startOfField = true
        while let scalar = scalars.popFirst() {
            if quoted {
                if scalar == "\"" {
                    if scalars.first == "\"" { scalars.removeFirst(); field.unicodeScalars.append("\"") } else { quoted = false }
                } else {
                    field.unicodeScalars.append(scalar)
                }
                continue
            }
            switch scalar {
            case "\"" where startOfField:
                quoted = true
                startOfField = false
            case "\"":
                throw Malformed()
            case ",":
                record.append(field)
                field = ""
                startOfField = true
            case "\r":
                guard scalars.popFirst() == "\n" else { throw Malformed() }
                record.append(field)
                records.append(record)
                (record, field, startOfField) = ([], "", true)
            case "\n":
                throw Malformed()
            default:
                field.unicodeScalars.append(scalar)
                startOfField = false
            }
        }
        guard !quoted, field.isEmpty, record.isEmpty else { throw Malformed() }
        return records
    }
}
