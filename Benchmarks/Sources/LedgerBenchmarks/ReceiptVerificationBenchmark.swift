import AppStore
import AppStoreSimulator
import AsyncHTTPClient
import Foundation
import LedgerDomain
import LedgerStore
import Logging
import ServiceLifecycle

/// Receipts verified per second through `AppStoreReceiptVerifier` against the simulator on loopback,
/// and the latency the client adds.
///
/// Starts a production simulator on an ephemeral 127.0.0.1 port, sells one consumable to each of
/// `users` test users, then verifies each user's app receipt once with `concurrency` requests in
/// flight. The client's added latency per request is its end-to-end time minus the time the
/// simulator's handler spent on that receipt (measured inside the simulator), so it covers HTTP on
/// both sides, the loopback, JSON encoding and the client's parsing. Client and simulator share this
/// process's cores, so with more requests in flight than cores the figures include waiting for CPU.
public struct ReceiptVerificationBenchmark: Sendable {
    public struct Options: Sendable {
        public var users: Int
        public var concurrency: Int
        /// Verifies before the measured run (connection set-up, first-use costs); not counted.
        public var warmUp: Int

        public init(users: Int = 5_000, concurrency: Int = 16, warmUp: Int = 200) {
            self.users = users
            self.concurrency = concurrency
            self.warmUp = warmUp
        }
    }

    /// Milliseconds at the 50th and 99th percentile.
    public struct Percentiles: Sendable {
        public let p50: Double
        public let p99: Double
    }

    public struct Result: Sendable {
        public let receipts: Int
        public let concurrency: Int
        public let seconds: Double
        public var receiptsPerSecond: Double { Double(receipts) / seconds }
        /// What a caller waits for one `verify`.
        public let endToEnd: Percentiles
        /// The simulator's own handling time.
        public let server: Percentiles
        /// End-to-end minus server handling, per request.
        public let clientAdded: Percentiles
    }

    let logger: Logger

    public init(logger: Logger) {
        self.logger = logger
    }

    public func run(_ options: Options) async throws -> Result {
        guard options.users >= 1, options.concurrency >= 1, options.warmUp >= 0 else {
            throw SimulatorError.badRequest("users and concurrency must be at least 1, warm-up at least 0")
        }
        let timing = SimulatorServerTiming()
        let (ports, portContinuation) = AsyncStream<Int>.makeStream()
        let simulator = try AppStoreSimulator(
            configuration: .init(host: "127.0.0.1", port: 0, environment: .production, timing: timing),
            logger: logger
        ) { port in
            portContinuation.yield(port)
            portContinuation.finish()
        }
        let group = ServiceGroup(configuration: .init(services: [simulator], logger: logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                // Ends the wait for the port below if the simulator cannot start.
                defer { portContinuation.finish() }
                try await group.run()
            }
            defer { tasks.cancelAll() }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                throw ReceiptVerificationError.unavailable("the simulator did not start")
            }
            let receipts = try await Self.issueReceipts(simulator, users: options.users)
            let result = try await measure(url: "http://127.0.0.1:\(port)/verifyReceipt", receipts: receipts, timing: timing, options: options)
            await group.triggerGracefulShutdown()
            try await tasks.waitForAll()
            return result
        }
    }

    private static func issueReceipts(_ simulator: AppStoreSimulator, users: Int) async throws -> [String] {
        try await simulator.issueReceipts(bundleId: "com.example.bench", consumable: "com.example.bench.coins", users: users)
    }

    private func measure(url: String, receipts: [String], timing: SimulatorServerTiming, options: Options) async throws -> Result {
        var pool = HTTPClient.Configuration.ConnectionPool()
        pool.concurrentHTTP1ConnectionsPerHostSoftLimit = options.concurrency
        let httpClient = HTTPClient(
            eventLoopGroup: HTTPClient.defaultEventLoopGroup,
            configuration: HTTPClient.Configuration(connectionPool: pool)
        )
        let verifier = AppStoreReceiptVerifier(
            configuration: AppStoreConfiguration(productionURL: url, sandboxURL: url, timeout: .seconds(30), retry: .none),
            httpClient: httpClient
        )
        let logger = self.logger
        do {
            let warmUp = Array(receipts.prefix(options.warmUp))
            _ = try await Self.verifyAll(warmUp, verifier: verifier, timing: timing, concurrency: options.concurrency, logger: logger)
            let clock = ContinuousClock()
            let started = clock.now
            let samples = try await Self.verifyAll(receipts, verifier: verifier, timing: timing, concurrency: options.concurrency, logger: logger)
            let elapsed = clock.now - started
            try await httpClient.shutdown()
            return Result(
                receipts: receipts.count,
                concurrency: options.concurrency,
                seconds: RetryPolicy.seconds(elapsed),
                endToEnd: Self.percentiles(samples.map(\.endToEnd)),
                server: Self.percentiles(samples.map(\.server)),
                clientAdded: Self.percentiles(samples.map { $0.endToEnd - $0.server })
            )
        } catch {
            try? await httpClient.shutdown()
            throw error
        }
    }

    private struct Sample: Sendable {
        let endToEnd: Double
        let server: Double
    }

    private static func verifyAll(
        _ receipts: [String],
        verifier: AppStoreReceiptVerifier,
        timing: SimulatorServerTiming,
        concurrency: Int,
        logger: Logger
    ) async throws -> [Sample] {
        try await withThrowingTaskGroup(of: [Sample].self) { group in
            for worker in 0..<concurrency {
                group.addTask {
                    let clock = ContinuousClock()
                    var samples: [Sample] = []
                    for index in stride(from: worker, to: receipts.count, by: concurrency) {
                        let started = clock.now
                        let receipt = try await verifier.verify(ReceiptVerificationRequest(receiptData: receipts[index]), logger: logger)
                        let endToEnd = RetryPolicy.seconds(clock.now - started) * 1000
                        guard receipt.transactions.count == 1 else {
                            throw ReceiptVerificationError.malformedResponse("the benchmark receipt \(index) came back with \(receipt.transactions.count) transactions")
                        }
                        let server = timing.duration(receiptSHA256: receipt.receiptSHA256).map { RetryPolicy.seconds($0) * 1000 } ?? 0
                        samples.append(Sample(endToEnd: endToEnd, server: server))
                    }
                    return samples
                }
            }
            var all: [Sample] = []
            for try await samples in group { all += samples }
            return all
        }
    }

    static func percentiles(_ values: [Double]) -> Percentiles {
        let sorted = values.sorted()
        func at(_ p: Double) -> Double {
            guard !sorted.isEmpty else { return 0 }
            let index = min(sorted.count - 1, max(0, Int((p * Double(sorted.count)).rounded(.up)) - 1))
            return sorted[index]
        }
        return Percentiles(p50: at(0.5), p99: at(0.99))
    }
}
