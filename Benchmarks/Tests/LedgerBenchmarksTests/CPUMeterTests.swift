import Foundation
@testable import LedgerBenchmarks
import Testing

@Suite struct CPUMeterTests {
    @Test func readsUserAndSystemTimeAfterACommandNameWithSpacesAndParentheses() {
        // Fields 14 (utime) and 15 (stime) of proc(5), counted after the last ')'.
        let line = "4242 (ledger (serve) x) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 75 0 0 20 0 12 0 100 0 0"
        #expect(CPUMeter.cpuSeconds(stat: line, ticksPerSecond: 100) == 3.25)
        #expect(CPUMeter.cpuSeconds(stat: "4242 (cut short) S 1 2", ticksPerSecond: 100) == nil)
        #expect(CPUMeter.cpuSeconds(stat: "no parenthesis", ticksPerSecond: 100) == nil)
    }

    @Test(.enabled(if: CPUMeter.isAvailable, "needs Linux's /proc"))
    func countsTheWorkThisProcessDoesAndListsPostgreSQLLast() async throws {
        let meter = CPUMeter(processes: [("test", getpid())])
        #expect(meter.order == ["test", CPUMeter.postgres])
        // Work until the kernel has charged this process 50 ms more (its clock ticks are 10 ms),
        // or give up after 20 s of wall time.
        let start = meter.sample()
        let deadline = Date().addingTimeInterval(20)
        var checksum: UInt64 = 0
        var used: [CPUMeter.Use] = []
        repeat {
            for value in 0..<200_000 { checksum = checksum &* 31 &+ UInt64(value) }
            used = meter.used(since: start)
        } while used[0].seconds < 0.05 && Date() < deadline
        #expect(checksum != 1)
        #expect(used.map(\.name) == ["test", CPUMeter.postgres])
        #expect(used[0].seconds >= 0.05)
        #expect(used[1].seconds >= 0)
    }
}
