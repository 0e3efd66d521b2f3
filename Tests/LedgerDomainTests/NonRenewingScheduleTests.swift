import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

@Suite("Non-renewing subscription periods stack per group")
struct NonRenewingScheduleTests {
    let month = try! ISODuration(parsing: "P1M")
    let week = try! ISODuration(parsing: "P7D")

    func purchase(_ id: String, _ date: String, product: String = "gold.month", group: String = "gold", duration: ISODuration? = nil) -> NonRenewingPurchase {
        NonRenewingPurchase(transactionId: id, productId: product, group: group, purchaseDate: utc(date), duration: duration ?? month)
    }

    @Test("a second purchase starts where the first ends, even when bought early")
    func stacking() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2025-01-31T09:00:00.000Z"),
            purchase("t2", "2025-02-10T09:00:00.000Z"),
        ])
        #expect(periods.map(\.start) == [utc("2025-01-31T09:00:00.000Z"), utc("2025-02-28T09:00:00.000Z")])
        #expect(periods.map(\.end) == [utc("2025-02-28T09:00:00.000Z"), utc("2025-03-31T09:00:00.000Z")],
                "the second end is the chain's start plus two months, not the first end plus one")
    }

    @Test("twelve one-month passes bought on January 31 end on January 31 of the next year, each on its month's last day")
    func monthEndsDoNotDrift() {
        let periods = NonRenewingSchedule.periods(of: (1...12).map { purchase("t\($0)", "2025-01-31T12:00:00.000Z") })
        #expect(periods.last?.end == utc("2026-01-31T12:00:00.000Z"))
        #expect(periods.map { LedgerJSON.formatTimestamp($0.end).prefix(10) } == [
            "2025-02-28", "2025-03-31", "2025-04-30", "2025-05-31", "2025-06-30", "2025-07-31",
            "2025-08-31", "2025-09-30", "2025-10-31", "2025-11-30", "2025-12-31", "2026-01-31",
        ])
        #expect(zip(periods, periods.dropFirst()).allSatisfy { $0.end == $1.start }, "back to back")
    }

    @Test("a gap starts a new chain at the purchase date")
    func gapStartsANewChain() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2025-01-31T00:00:00.000Z"),
            purchase("t2", "2025-05-31T00:00:00.000Z"),
            purchase("t3", "2025-06-01T00:00:00.000Z"),
        ])
        #expect(periods[1].start == utc("2025-05-31T00:00:00.000Z"))
        #expect(periods[2].end == utc("2025-07-31T00:00:00.000Z"), "May 31 plus two months")
    }

    @Test("each period follows the one before it when the durations change unit: a week, then a month, then a week")
    func mixedDurationsFollowEachOther() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2026-02-22T12:00:00.000Z", product: "gold.week", duration: week),
            purchase("t2", "2026-02-22T13:00:00.000Z", product: "gold.month"),
            purchase("t3", "2026-02-22T14:00:00.000Z", product: "gold.month"),
            purchase("t4", "2026-02-22T15:00:00.000Z", product: "gold.week", duration: week),
        ])
        #expect(periods.map { LedgerJSON.formatTimestamp($0.end) } == [
            "2026-03-01T12:00:00.000Z", "2026-04-01T12:00:00.000Z", "2026-05-01T12:00:00.000Z", "2026-05-08T12:00:00.000Z",
        ], "a month from March 1 ends April 1, not March 29; months within a run still count from its start")
        #expect(zip(periods, periods.dropFirst()).allSatisfy { $0.end == $1.start }, "back to back")
    }

    @Test("activeUntil is the end of the group's run, through periods of the group's other products")
    func activeUntilIsTheGroupsRun() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2025-03-01T00:00:00.000Z", product: "gold.week", duration: week),
            purchase("t2", "2025-03-02T00:00:00.000Z", product: "gold.month"),
        ])
        let entitlements = Entitlements(at: utc("2025-03-03T00:00:00.000Z"), owned: [], periods: periods, balances: [])
        let week = entitlements.subscriptions.first { $0.productId == "gold.week" }
        #expect(week?.isActive == true)
        #expect(week?.activeUntil == utc("2025-04-08T00:00:00.000Z"), "the week, then the month stacked on it")
        #expect(entitlements.subscriptions.first { $0.productId == "gold.month" }?.isActive == false, "its own period starts on the 8th")
    }

    @Test("a purchase after the group's last period ended starts at its purchase date")
    func gap() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2025-01-01T00:00:00.000Z"),
            purchase("t2", "2025-06-15T00:00:00.000Z"),
        ])
        #expect(periods[1].start == utc("2025-06-15T00:00:00.000Z"))
    }

    @Test("products of one group stack together; other groups do not interfere")
    func groups() {
        let periods = NonRenewingSchedule.periods(of: [
            purchase("t1", "2025-03-01T00:00:00.000Z", product: "gold.month"),
            purchase("t2", "2025-03-02T00:00:00.000Z", product: "gold.week", duration: week),
            purchase("t3", "2025-03-03T00:00:00.000Z", product: "silver.month", group: "silver"),
        ])
        let byID = Dictionary(uniqueKeysWithValues: periods.map { ($0.transactionId, $0) })
        #expect(byID["t2"]?.start == utc("2025-04-01T00:00:00.000Z"))
        #expect(byID["t2"]?.end == utc("2025-04-08T00:00:00.000Z"))
        #expect(byID["t3"]?.start == utc("2025-03-03T00:00:00.000Z"))
    }

    @Test("revoking a purchase in the middle of a stack moves the later periods up")
    func revocationRestacks() {
        let purchases = [
            purchase("t1", "2025-01-01T00:00:00.000Z"),
            purchase("t2", "2025-01-02T00:00:00.000Z"),
            purchase("t3", "2025-01-03T00:00:00.000Z"),
        ]
        let periods = NonRenewingSchedule.periods(of: purchases, revoked: ["t2"])
        #expect(periods.map(\.transactionId) == ["t1", "t3"])
        #expect(periods[1].start == utc("2025-02-01T00:00:00.000Z"))
        #expect(periods[1].end == utc("2025-03-01T00:00:00.000Z"))
    }

    @Test("activity is answered at read time from the stored ends")
    func activeAt() {
        let period = NonRenewingSchedule.periods(of: [purchase("t1", "2025-01-01T00:00:00.000Z")])[0]
        #expect(period.isActive(at: utc("2025-01-15T00:00:00.000Z")))
        #expect(!period.isActive(at: utc("2025-02-01T00:00:00.000Z")), "the end is exclusive")
        #expect(!period.isActive(at: utc("2024-12-31T23:59:59.000Z")))
    }

    @Test("any arrival order, with any purchase repeated, gives the same periods", arguments: 0..<25)
    func orderIndependence(seed: Int) {
        var generator = SeededGenerator(seed: UInt64(seed))
        let purchases = (0..<12).map { index in
            purchase(
                "t\(index)",
                LedgerJSON.formatTimestamp(Date(timeIntervalSince1970: 1_735_689_600 + Double(Int.random(in: 0..<90, using: &generator)) * 86_400)),
                product: index % 3 == 0 ? "gold.week" : "gold.month",
                group: index % 4 == 0 ? "silver" : "gold",
                duration: index % 3 == 0 ? week : month
            )
        }
        let revoked: Set<String> = ["t\(Int.random(in: 0..<12, using: &generator))"]
        let expected = NonRenewingSchedule.periods(of: purchases, revoked: revoked)
        let shuffled = (purchases + purchases.prefix(4)).shuffled(using: &generator)
        #expect(NonRenewingSchedule.periods(of: shuffled, revoked: revoked) == expected)
        // Periods of one group never overlap.
        for group in Set(expected.map(\.group)) {
            let inGroup = expected.filter { $0.group == group }
            for (earlier, later) in zip(inGroup, inGroup.dropFirst()) {
                #expect(earlier.end <= later.start)
            }
        }
    }
}
