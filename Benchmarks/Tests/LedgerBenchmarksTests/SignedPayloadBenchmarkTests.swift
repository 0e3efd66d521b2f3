import LedgerBenchmarks
import Testing

@Suite struct SignedPayloadBenchmarkTests {
    @Test func aSmallRunVerifiesEveryPayloadAndReportsBothFigures() async throws {
        let result = try await SignedPayloadBenchmark().run(.init(payloads: 60, concurrency: 4))
        #expect(result.payloads == 60 && result.concurrency == 4)
        #expect(result.firstMicroseconds > 0)
        for figures in [result.verify, result.bareSignature] {
            #expect(figures.p50 > 0 && figures.p99 >= figures.p50 && figures.perSecond > 0)
        }
        #expect(result.concurrentPerSecond > 0)
        // Verifying does the bare check and more: it cannot be faster at the median.
        #expect(result.verify.p50 >= result.bareSignature.p50)
    }
}
