import Foundation
import LedgerDomain
import Testing

func utc(_ text: String) -> Date {
    LedgerJSON.parseTimestamp(text)!
}

@Suite("Subscription durations use calendar arithmetic in UTC")
struct ISODurationTests {
    @Test("catalog durations parse and print back", arguments: ["P7D", "P1M", "P2M", "P3M", "P6M", "P1Y", "P1Y2M", "P2W", "P1Y2M3W4D"])
    func roundTrip(_ text: String) throws {
        #expect(try ISODuration(parsing: text).description == text)
    }

    @Test("malformed durations are refused", arguments: ["", "P", "7D", "P1H", "PT1H", "P1D1M", "P-1M", "P0D", "P1M1M", "P99999D", "1Y"])
    func refused(_ text: String) {
        #expect(throws: LedgerInputError.self) { try ISODuration(parsing: text) }
    }

    @Test("a month after January 31 is the last day of February, in leap and common years")
    func monthEnd() throws {
        let month = try ISODuration(parsing: "P1M")
        #expect(month.added(to: utc("2025-01-31T10:00:00.000Z")) == utc("2025-02-28T10:00:00.000Z"))
        #expect(month.added(to: utc("2024-01-31T10:00:00.000Z")) == utc("2024-02-29T10:00:00.000Z"))
        #expect(month.added(to: utc("2025-03-31T00:00:00.000Z")) == utc("2025-04-30T00:00:00.000Z"))
        #expect(try ISODuration(parsing: "P3M").added(to: utc("2025-11-30T23:59:59.000Z")) == utc("2026-02-28T23:59:59.000Z"))
    }

    @Test("a year after February 29 is February 28")
    func leapDay() throws {
        #expect(try ISODuration(parsing: "P1Y").added(to: utc("2024-02-29T12:00:00.000Z")) == utc("2025-02-28T12:00:00.000Z"))
        #expect(try ISODuration(parsing: "P1Y").added(to: utc("2023-03-01T00:00:00.000Z")) == utc("2024-03-01T00:00:00.000Z"))
    }

    @Test("days and weeks are calendar days, across a year end")
    func days() throws {
        #expect(try ISODuration(parsing: "P7D").added(to: utc("2025-12-28T08:30:00.000Z")) == utc("2026-01-04T08:30:00.000Z"))
        #expect(try ISODuration(parsing: "P2W").added(to: utc("2024-02-20T00:00:00.000Z")) == utc("2024-03-05T00:00:00.000Z"))
    }
}

@Suite("Catalog products")
struct ProductTests {
    @Test("subscriptions need a duration; other types refuse one; group defaults to the product id")
    func durations() throws {
        #expect(throws: LedgerInputError.self) { try Product(productId: "gold.month", type: .nonRenewing) }
        #expect(throws: LedgerInputError.self) { try Product(productId: "sub", type: .autoRenewable) }
        #expect(throws: LedgerInputError.self) {
            try Product(productId: "coins", type: .consumable, duration: ISODuration(parsing: "P1M"))
        }
        let product = try Product(productId: "gold.month", type: .nonRenewing, duration: ISODuration(parsing: "P1M"))
        #expect(product.subscriptionGroup == "gold.month")
    }

    @Test("prices are decimal text per ISO currency code", arguments: [["USD": "0.99"], ["EUR": "1"], ["JPY": "120.5000"]])
    func validPrices(_ prices: [String: String]) throws {
        #expect(try Product(productId: "coins", type: .consumable, prices: prices).prices == prices)
    }

    @Test("bad prices, currencies and ids are refused with a message", arguments: [
        ["usd": "0.99"], ["USD": "0,99"], ["USD": "-1"], ["USD": ".5"], ["USD": "1.23456"], ["DOLLAR": "1"],
    ])
    func invalidPrices(_ prices: [String: String]) {
        #expect(throws: LedgerInputError.self) { try Product(productId: "coins", type: .consumable, prices: prices) }
    }

    @Test("'unknown' cannot be defined; it marks products missing from the catalog")
    func unknownType() {
        #expect(throws: LedgerInputError.self) { try Product(productId: "x", type: .unknown) }
        #expect(throws: LedgerInputError.self) { try Product(productId: "has space", type: .consumable) }
        #expect(throws: LedgerInputError.self) { try Product(productId: "a/b", type: .consumable) }
    }
}
