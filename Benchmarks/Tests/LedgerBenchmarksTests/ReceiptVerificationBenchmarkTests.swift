import AppStore
import LedgerBenchmarks
import LedgerTesting
import Testing

@Suite struct ReceiptVerificationBenchmarkTests {
    @Test func aSmallRunVerifiesEveryReceiptAndReportsLatencies() async throws {
        let result = try await ReceiptVerificationBenchmark(logger: quietLogger).run(.init(users: 40, concurrency: 4, warmUp: 4))
        #expect(result.receipts == 40)
        #expect(result.concurrency == 4)
        #expect(result.receiptsPerSecond > 0)
        #expect(result.endToEnd.p50 > 0)
        #expect(result.server.p50 > 0, "the simulator measured its own handling")
        #expect(result.endToEnd.p99 >= result.endToEnd.p50)
        #expect(result.clientAdded.p50 <= result.endToEnd.p50)
    }
}
