import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

/// Money as Apple's fields define it: `price` is the whole quantity's, `revocationPercentage` is
/// milliunits of a percent of the whole quantity, `revocationType` says how a refund took it back.
@Suite struct AppleMoneyTests {
    // MARK: Money

    @Test("amounts multiply, divide and share exactly, rounded to the currency's minor unit")
    func money() {
        #expect(Money.times("0.99", 3) == "2.97")
        #expect(Money.times("1.005", 2) == "2.01")
        #expect(Money.unitPrice(of: "2.97", quantity: 3) == "0.99")
        #expect(Money.unitPrice(of: "10", quantity: 3) == "3.333333", "six places at most")
        #expect(Money.unitPrice(of: "1", quantity: 0) == nil)
        #expect(Money.share(of: "9.99", milliPercent: 40000, currency: "USD") == "4", "3.996 is 4.00 in cents")
        #expect(Money.share(of: "2.97", milliPercent: 33333, currency: "USD") == "0.99")
        #expect(Money.share(of: "1200", milliPercent: 67932, currency: "JPY") == "815", "yen have no minor unit")
        #expect(Money.share(of: "3.5", milliPercent: 15, currency: "KWD") == "0.001", "three places for dinars")
        #expect(Money.share(of: "9.99", milliPercent: 100_000, currency: "USD") == "9.99")
        #expect(Money.share(of: "9.99", milliPercent: 250_000, currency: "USD") == "9.99", "never more than all of it")
        #expect(Money.units(of: 3, milliPercent: 33333) == 1 && Money.units(of: 3, milliPercent: 66667) == 2)
        #expect(Money.units(of: 4, milliPercent: 50000) == 2 && Money.units(of: 1, milliPercent: 40000) == 0)
    }

    // MARK: Currency over time

    @Test("the currency in force at an instant is the last said at or before it, in any order of saying")
    func currencyTimeline() {
        let said: [(String, String)] = [("USD", "2025-01-01T00:00:00.000Z"), ("USD", "2025-03-01T00:00:00.000Z"),
                                        ("EUR", "2025-06-01T00:00:00.000Z"), ("EUR", "2025-07-01T00:00:00.000Z")]
        var forward = CurrencyTimeline(), backward = CurrencyTimeline()
        for (currency, date) in said { forward.add(currency, at: utc(date)) }
        for (currency, date) in said.reversed() { backward.add(currency, at: utc(date)) }
        #expect(forward == backward)
        #expect(forward.changes.map(\.currency) == ["USD", "EUR"])
        #expect(forward.currency(at: utc("2024-12-01T00:00:00.000Z")) == "USD", "before anything was said, the first said")
        #expect(forward.currency(at: utc("2025-05-31T23:59:59.999Z")) == "USD")
        #expect(forward.currency(at: utc("2025-06-01T00:00:00.000Z")) == "EUR")
        #expect(CurrencyTimeline().currency(at: Date()) == nil)
    }

    @Test("two timelines answer alike until the first instant one of them says otherwise")
    func currencyTimelinesPartFrom() {
        func timeline(_ said: [(String, String)]) -> CurrencyTimeline {
            var timeline = CurrencyTimeline()
            for (currency, date) in said { timeline.add(currency, at: utc(date)) }
            return timeline
        }
        let usd = timeline([("USD", "2025-01-01T00:00:00.000Z")])
        let thenEuros = timeline([("USD", "2025-01-01T00:00:00.000Z"), ("EUR", "2025-06-01T00:00:00.000Z")])
        let backToDollars = timeline([("USD", "2025-01-01T00:00:00.000Z"), ("EUR", "2025-06-01T00:00:00.000Z"), ("USD", "2025-09-01T00:00:00.000Z")])
        let eurosEarlier = timeline([("USD", "2025-01-01T00:00:00.000Z"), ("EUR", "2025-04-01T00:00:00.000Z")])
        #expect(usd.firstDifference(from: usd) == nil)
        #expect(usd.firstDifference(from: timeline([("USD", "2025-02-01T00:00:00.000Z")])) == nil, "the same currency said again")
        #expect(usd.firstDifference(from: thenEuros) == utc("2025-06-01T00:00:00.000Z").milliseconds)
        #expect(thenEuros.firstDifference(from: backToDollars) == utc("2025-09-01T00:00:00.000Z").milliseconds)
        #expect(thenEuros.firstDifference(from: eurosEarlier) == utc("2025-04-01T00:00:00.000Z").milliseconds)
        #expect(usd.firstDifference(from: timeline([("EUR", "2025-01-01T00:00:00.000Z")])) == Int64.min)
        #expect(CurrencyTimeline().firstDifference(from: usd) == Int64.min)
    }

    // MARK: Judging Apple's fields

    static func signed(_ id: String, _ product: String, type: String, quantity: Int = 1, price: String, currency: String = "USD",
                       date: String = "2025-01-01T00:00:00.000Z", signedAt: String = "2025-01-01T00:00:00.000Z",
                       extra: [String: String] = [:]) -> [String: String] {
        SignedFieldsTests.signed(id, product, type: type, quantity: quantity, purchased: utc(date), price: price, currency: currency,
                                 signed: utc(signedAt), extra: extra)
    }

    static func post(_ fields: [String: String], on stream: inout UserStream, answeredAt: String = "2025-01-01T00:00:00.000Z") throws {
        let answer = AppStoreAnswer(receiptHash: String(repeating: "a", count: 64), answerHash: String(repeating: "b", count: 64),
                                    environment: .production, status: 0, answeredAt: utc(answeredAt), transactions: [fields], renewalInfo: [])
        stream.append(try UserDecisions.observeReceipt(answer, app: "com.example.app", deviceId: "phone", digest: TestReceipts.digest,
                                                       on: stream.state).events)
    }

    static func refunded(_ fields: [String: String], type: String, percentage: Int? = nil, at date: String = "2025-01-10T00:00:00.000Z")
        -> [String: String] {
        var refunded = fields
        refunded["revocationDate"] = String(utc(date).milliseconds)
        refunded["revocationReason"] = "0"
        refunded["revocationType"] = type
        refunded["revocationPercentage"] = percentage.map(String.init)
        refunded["signedDate"] = String(utc(date).milliseconds)
        return refunded
    }

    @Test("Apple's price is the total of the quantity: the unit price is its share, the amount is it")
    func quantityTotal() throws {
        var stream = UserStream(catalog: catalog)
        try Self.post(Self.signed("1", "coins", type: "Consumable", quantity: 3, price: "2970"), on: &stream)
        let judged = try #require(stream.transaction("1"))
        #expect(judged.amount == "2.97" && judged.price == "0.99" && judged.priceSource == .appStore && judged.catalogPrice == nil)
        // A device's price with a receipt is a unit price: the amount is it times the quantity.
        try stream.receipt([transaction("2", "coins", quantity: 2)], price: "0.99")
        #expect(stream.transaction("2")?.amount == "1.98" && stream.transaction("2")?.price == "0.99")
    }

    @Test("a prorated refund of a consumable takes back its share of the money and of the units")
    func proratedConsumable() throws {
        var stream = UserStream(catalog: catalog)
        let bought = Self.signed("1", "coins", type: "Consumable", quantity: 3, price: "2970")
        try Self.post(bought, on: &stream)
        try Self.post(Self.refunded(bought, type: "REFUND_PRORATED", percentage: 33333), on: &stream)
        let judged = try #require(stream.transaction("1"))
        #expect(judged.refund == .init(kind: .prorated, share: 33333))
        #expect(judged.refundedUnits == 1 && judged.refundedAmount == "0.99")
        #expect(stream.state.balance(of: "coins") == 2)
        #expect(judged.revocationReason?.contains("33.333%") == true, "\(judged.revocationReason ?? "")")
    }

    @Test("a prorated refund of a subscription gives back its share and ends the product, as a full one does")
    func proratedSubscription() throws {
        var stream = UserStream(catalog: catalog)
        let bought = Self.signed("1", "levels", type: "Non-Consumable", price: "4990")
        try Self.post(bought, on: &stream)
        try Self.post(Self.refunded(bought, type: "REFUND_PRORATED", percentage: 40000), on: &stream)
        let judged = try #require(stream.transaction("1"))
        #expect(judged.isRevoked && judged.refundedUnits == 1 && judged.refundedAmount == "2")
    }

    @Test("a receipt's view of the refund, or an older signed view, leaves it as Apple's latest signed view described it")
    func refundKeptAcrossViews() throws {
        var stream = UserStream(catalog: catalog)
        let bought = Self.signed("1", "coins", type: "Consumable", quantity: 4, price: "3960")
        try Self.post(bought, on: &stream)
        try Self.post(Self.refunded(bought, type: "REFUND_PRORATED", percentage: 50000), on: &stream)
        try stream.receipt([transaction("1", "coins", quantity: 4, cancelled: "2025-01-10T00:00:00.000Z")])
        #expect(stream.transaction("1")?.refund == .init(kind: .prorated, share: 50000))
        try Self.post(bought, on: &stream)
        #expect(stream.transaction("1")?.refundedAmount == "1.98" && stream.state.balance(of: "coins") == 2)
        // A refund reversed: Apple's later view has no revocation fields, and the units come back.
        var reversed = bought
        reversed["signedDate"] = String(utc("2025-01-20T00:00:00.000Z").milliseconds)
        try Self.post(reversed, on: &stream)
        #expect(stream.transaction("1")?.isRevoked == false && stream.state.balance(of: "coins") == 4)
    }

    @Test("a family revocation moves no money; a full refund all of it")
    func refundKinds() throws {
        var stream = UserStream(catalog: catalog)
        let shared = Self.signed("1", "levels", type: "Non-Consumable", price: "4990", extra: ["inAppOwnershipType": "FAMILY_SHARED"])
        try Self.post(shared, on: &stream)
        try Self.post(Self.refunded(shared, type: "FAMILY_REVOKE"), on: &stream)
        #expect(stream.transaction("1")?.refund?.kind == .familyRevoke && stream.transaction("1")?.isRevoked == true)
        let own = Self.signed("2", "coins", type: "Consumable", quantity: 2, price: "1980")
        try Self.post(own, on: &stream)
        try Self.post(Self.refunded(own, type: "REFUND_FULL"), on: &stream)
        #expect(stream.transaction("2")?.refundedAmount == "1.98" && stream.transaction("2")?.refundedUnits == 2)
        // A percentage outside Apple's range is not trusted as a share: the refund is full.
        let odd = Self.signed("3", "coins", type: "Consumable", price: "990")
        try Self.post(odd, on: &stream)
        try Self.post(Self.refunded(odd, type: "REFUND_PRORATED", percentage: 250_000), on: &stream)
        #expect(stream.transaction("3")?.refund == .full)
    }

    @Test("the catalog prices a transaction in the currency in force when it happened, not the latest post's")
    func currencyInForce() throws {
        var stream = UserStream(catalog: catalog)
        try stream.receipt([transaction("1", "pro", date: "2025-01-01T00:00:00.000Z", expires: "2025-02-01T00:00:00.000Z")],
                           price: "2.99", currency: "USD", answeredAt: "2025-01-01T00:00:00.000Z")
        try stream.receipt([transaction("2", "pro", original: "1", date: "2025-02-01T00:00:00.000Z", expires: "2025-03-01T00:00:00.000Z")],
                           answeredAt: "2025-02-01T00:00:10.000Z")
        // The user moves: a coin bought in France.
        try stream.receipt([transaction("3", "coins", date: "2025-02-15T00:00:00.000Z")], price: "1.09", currency: "EUR",
                           answeredAt: "2025-02-15T00:00:10.000Z")
        try stream.receipt([transaction("4", "pro", original: "1", date: "2025-03-01T00:00:00.000Z", expires: "2025-04-01T00:00:00.000Z")],
                           answeredAt: "2025-03-01T00:00:10.000Z")
        #expect(stream.transaction("2")?.currency == "USD" && stream.transaction("2")?.price == "2.99")
        #expect(stream.transaction("4")?.currency == "EUR" && stream.transaction("4")?.price == "2.49")
    }

    @Test("the storefront and the original purchase date come from Apple's fields; a restore of an unseen purchase is owned since it")
    func storefrontAndOriginalPurchase() throws {
        var stream = UserStream(catalog: catalog)
        try Self.post(Self.signed("7", "levels", type: "Non-Consumable", price: "4990", date: "2025-06-01T00:00:00.000Z",
                                  extra: ["originalTransactionId": "5", "originalPurchaseDate": String(utc("2024-02-03T00:00:00.000Z").milliseconds),
                                          "storefront": "FRA", "storefrontId": "143442"]), on: &stream)
        let judged = try #require(stream.transaction("7"))
        #expect(judged.kind == .restore && judged.storefront == "FRA" && judged.storefrontId == "143442")
        let owned = try #require(stream.state.entitlements(catalog: catalog, at: utc("2025-07-01T00:00:00.000Z")).owned.first)
        #expect(owned.ownedSince == utc("2024-02-03T00:00:00.000Z"))
    }

    @Test("an Apple-signed currency that is not an ISO 4217 code prices nothing; the field stays as it came")
    func currencyMustBeACode() throws {
        for odd in ["usd", "US", "USDX", "=HYPERLINK(\"x\")", "U$D"] {
            let fields = AppStoreFields(Self.signed("1", "coins", type: "Consumable", price: "990", currency: odd))
            #expect(fields.price == nil, "\(odd)")
            #expect(fields["currency"] == odd)
        }
        #expect(AppStoreFields(Self.signed("1", "coins", type: "Consumable", price: "990", currency: "EUR")).price?.currency == "EUR")
    }
}
