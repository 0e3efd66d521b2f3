import Foundation

/// A seeded mutation fuzzer over the receipt parser and every JSON body of the HTTP API.
///
/// Case `i` goes to target `i % 12` of a fixed rotation (the in-process parser twice, each HTTP
/// target once, the signed-payload routes among them) and draws every choice from `FuzzRandom(seed:case:)`: the same seed and count
/// send the same mutations (transaction ids the simulator hands out differ from run to run, so
/// bodies naming them do too). The properties (see `ReceiptParserFuzz` and `LedgerAPIFuzz`):
/// no crash, no 5xx, every refusal explained, nothing recorded for a refused input; after the
/// last case, no projection stopped on what the accepted ones recorded.
public struct MutationFuzzer: Sendable {
    public struct Configuration: Sendable {
        public var cases: Int
        public var seed: UInt64

        public init(cases: Int, seed: UInt64) {
            self.cases = cases
            self.seed = seed
        }
    }

    /// Failures kept with their bodies; the rest are counted.
    public static let keptFailures = 50

    let parser: ReceiptParserFuzz
    let api: LedgerAPIFuzz

    public init(parser: ReceiptParserFuzz, api: LedgerAPIFuzz) {
        self.parser = parser
        self.api = api
    }

    /// The rotation of targets, case by case.
    public var rotation: [String] { [ReceiptParserFuzz.target] + api.targets.prefix(4) + [ReceiptParserFuzz.target] + api.targets.dropFirst(4) }

    /// Runs the cases; `onCase` is told each case's index and target before it runs (for tracing
    /// and progress).
    public func run(_ configuration: Configuration, onCase: (Int, String) -> Void = { _, _ in }) async throws -> FuzzReport {
        let rotation = self.rotation
        var seen: [String] = []
        for target in rotation where !seen.contains(target) { seen.append(target) }
        var report = FuzzReport(seed: configuration.seed, tallies: seen.map(FuzzTally.init(target:)))
        let start = ContinuousClock.now
        var log = try await api.world.snapshot()
        for index in 0..<configuration.cases {
            let target = rotation[index % rotation.count]
            onCase(index, target)
            var random = FuzzRandom(seed: configuration.seed, case: index)
            let started = ContinuousClock.now
            let outcome: FuzzOutcome
            if target == ReceiptParserFuzz.target {
                outcome = parser.run(index, random: &random)
            } else {
                (outcome, log) = try await api.run(target, index: index, random: &random, before: log)
            }
            report.record(outcome, target: target, elapsed: ContinuousClock.now - started)
        }
        for failed in try await api.world.failedProjections() {
            report.recordProjection(FuzzFailure(.projectionFailed, target: "projections", caseIndex: configuration.cases, detail: failed))
        }
        let elapsed = ContinuousClock.now - start
        report.seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return report
    }
}

extension FuzzReport {
    mutating func record(_ outcome: FuzzOutcome, target: String, elapsed: Duration) {
        if let index = tallies.firstIndex(where: { $0.target == target }) {
            tallies[index].add(outcome)
            tallies[index].seconds += Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        }
        if case .failed(let found) = outcome {
            failureCount += found.count
            failures += found.prefix(max(0, MutationFuzzer.keptFailures - failures.count))
        }
    }

    mutating func recordProjection(_ failure: FuzzFailure) {
        projectionFailures += 1
        failureCount += 1
        if failures.count < MutationFuzzer.keptFailures { failures.append(failure) }
    }
}
