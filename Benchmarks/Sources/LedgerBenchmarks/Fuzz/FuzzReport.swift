import Foundation

/// What a run found.
public struct FuzzReport: Sendable {
    public let seed: UInt64
    public internal(set) var tallies: [FuzzTally]
    /// The first failures found (at most `MutationFuzzer.keptFailures`), to replay and fix.
    public internal(set) var failures: [FuzzFailure] = []
    /// How many failures there were in all.
    public internal(set) var failureCount = 0
    /// Projections that stopped on an event the accepted cases recorded (checked after the last case).
    public internal(set) var projectionFailures = 0
    public internal(set) var seconds: Double = 0

    public var cases: Int { tallies.reduce(0) { $0 + $1.cases } }
    public var casesPerSecond: Double { seconds > 0 ? Double(cases) / seconds : 0 }
    public var isClean: Bool { failureCount == 0 }

    public func tally(_ target: String) -> FuzzTally? { tallies.first { $0.target == target } }

    /// The report as the benchmark prints it: one block per target, then the totals.
    public var lines: [String] {
        var lines: [String] = []
        for tally in tallies {
            lines.append(
                tally.target.padding(toLength: 18, withPad: " ", startingAt: 0)
                    + " cases=\(tally.cases) accepted=\(tally.accepted) refused=\(tally.refusedTotal) "
                    + FuzzFailure.Kind.allCases.map { "\($0.rawValue)=\(tally.count($0))" }.joined(separator: " ")
                    + String(format: " (%.0f cases/s)", tally.seconds > 0 ? Double(tally.cases) / tally.seconds : 0)
            )
            for (reason, count) in tally.refused.sorted(by: { $0.key < $1.key }) {
                lines.append("    refused \(reason): \(count)")
            }
        }
        let totals = FuzzFailure.Kind.allCases.map { kind in "\(kind.rawValue)=\(tallies.reduce(0) { $0 + $1.count(kind) })" }
        lines.append("projections failed=\(projectionFailures)")
        lines.append(String(format: "total cases=%d in %.1f s (%.0f cases/s) ", cases, seconds, casesPerSecond) + totals.joined(separator: " "))
        return lines
    }
}
