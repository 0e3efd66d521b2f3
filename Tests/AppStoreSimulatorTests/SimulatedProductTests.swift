@testable import AppStore
@testable import AppStoreSimulator
import Foundation
import LedgerDomain
import Testing

@Suite struct SimulatedProductTests {
    @Test(arguments: [
        (SubscriptionDuration.sevenDays, 3), (.oneMonth, 5), (.twoMonths, 10), (.threeMonths, 15), (.sixMonths, 30), (.oneYear, 60),
    ])
    func sandboxPeriodsFollowTheAcceleratedSchedule(duration: SubscriptionDuration, minutes: Int) {
        #expect(duration.sandboxPeriod == .seconds(minutes * 60))
        let start = Date(timeIntervalSince1970: 1_356_998_400)
        #expect(duration.periodStart(6, from: start, in: .sandbox) == start.addingTimeInterval(Double(6 * minutes * 60)))
    }

    @Test func productionPeriodsAreCalendarPeriodsInUTC() {
        let start = Date(timeIntervalSince1970: 1_359_590_400)  // 2013-01-31T00:00:00Z
        #expect(SubscriptionDuration.oneMonth.periodStart(1, from: start, in: .production) == Date(timeIntervalSince1970: 1_362_009_600))  // 2013-02-28
        #expect(SubscriptionDuration.oneYear.periodStart(1, from: start, in: .production) == Date(timeIntervalSince1970: 1_391_126_400))  // 2014-01-31
        #expect(SubscriptionDuration.sevenDays.periodStart(2, from: start, in: .production) == start.addingTimeInterval(14 * 86_400))
    }

    @Test func durationsAreTheCatalogsDurations() throws {
        #expect(SubscriptionDuration.allCases.map(\.rawValue) == ["P7D", "P1M", "P2M", "P3M", "P6M", "P1Y"])
        for duration in SubscriptionDuration.allCases {
            #expect(try ISODuration(parsing: duration.rawValue) == duration.isoDuration)
        }
        let jan31 = Date(timeIntervalSince1970: 1_359_590_400)
        #expect(SubscriptionDuration.oneMonth.periodStart(2, from: jan31, in: .production) == Date(timeIntervalSince1970: 1_364_688_000), "Mar 31, not Mar 28")
    }

    @Test func receiptsAreBoundToTheirSigningKey() {
        let payload = SimulatorReceiptPayload(kind: .app, environment: .sandbox, bundleId: "b", userId: "u", transactionIds: ["1"], issuedAt: 0)
        let signer = SimulatorReceiptSigner(keyText: "k")
        let receipt = signer.issue(payload)
        #expect(signer.open(receipt) == .success(payload))
        #expect(SimulatorReceiptSigner(keyText: "k").open(receipt) == .success(payload), "the same key text gives the same key")
        #expect(SimulatorReceiptSigner(keyText: "other").open(receipt) == .failure(.notAuthentic))
        #expect(SimulatorReceiptSigner(keyText: nil).open(receipt) == .failure(.notAuthentic))
        #expect(signer.open("") == .failure(.malformed))
    }
}
