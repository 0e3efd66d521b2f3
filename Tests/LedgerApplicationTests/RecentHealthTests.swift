import Foundation
import LedgerApplication
import Synchronization
import Testing

@Suite("RecentHealth: one reading of the database serves the probes that follow it")
struct RecentHealthTests {
    /// A health source that counts its readings, each taking `delay`, and reports the reading's
    /// number as the log's head; it fails while `failing` is set.
    final class CountingSource: HealthCheck {
        let readings = Mutex(0)
        let failing = Mutex(false)
        let delay: Duration

        init(delay: Duration = .zero) { self.delay = delay }

        struct Unreachable: Error {}

        func health(thresholds: LedgerHealth.Thresholds) async throws -> LedgerHealth {
            let number = readings.withLock { count -> Int in
                count += 1
                return count
            }
            if delay > .zero { try await Task.sleep(for: delay) }
            if failing.withLock({ $0 }) { throw Unreachable() }
            return LedgerHealth.judge([], head: Int64(number), holder: nil, thresholds: thresholds)
        }
    }

    @Test("probes within the reading's age are answered from it; the next one after reads again")
    func keepsAReadingForItsAge() async throws {
        let source = CountingSource()
        let health = RecentHealth(source, maximumAge: .seconds(600))
        for _ in 0..<50 {
            #expect(try await health.health(thresholds: .init()).head == 1)
        }
        #expect(source.readings.withLock { $0 } == 1)

        // However slow the machine, a reading older than its age is not answered again.
        let brief = RecentHealth(source, maximumAge: .milliseconds(50))
        #expect(try await brief.health(thresholds: .init()).head == 2)
        try await Task.sleep(for: .milliseconds(100))
        #expect(try await brief.health(thresholds: .init()).head == 3)
        #expect(source.readings.withLock { $0 } == 3)
    }

    @Test("probes arriving together share one reading")
    func concurrentProbesShareOneReading() async throws {
        let source = CountingSource(delay: .milliseconds(200))
        let health = RecentHealth(source, maximumAge: .zero)
        let heads = try await withThrowingTaskGroup(of: Int64.self) { group in
            for _ in 0..<32 { group.addTask { try await health.health(thresholds: .init()).head } }
            return try await group.reduce(into: [Int64]()) { $0.append($1) }
        }
        #expect(heads.count == 32)
        #expect(Set(heads).count < 32, "32 probes made \(Set(heads).count) readings")
        #expect(source.readings.withLock { $0 } == Set(heads).count)
    }

    @Test("a failed reading is not kept: the next probe reads again")
    func failuresAreNotKept() async throws {
        let source = CountingSource()
        let health = RecentHealth(source, maximumAge: .seconds(60))
        source.failing.withLock { $0 = true }
        await #expect(throws: CountingSource.Unreachable.self) { try await health.health(thresholds: .init()) }
        source.failing.withLock { $0 = false }
        #expect(try await health.health(thresholds: .init()).head == 2)
        #expect(try await health.health(thresholds: .init()).head == 2)
    }

    @Test("a reading made with other thresholds is not reused")
    func readingsBelongToTheirThresholds() async throws {
        let source = CountingSource()
        let health = RecentHealth(source, maximumAge: .seconds(60))
        #expect(try await health.health(thresholds: .init(stall: .seconds(30))).head == 1)
        #expect(try await health.health(thresholds: .init(stall: .seconds(5))).head == 2)
    }
}
