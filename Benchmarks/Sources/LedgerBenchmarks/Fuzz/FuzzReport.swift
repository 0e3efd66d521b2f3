import Foundation

/// What one case came to.
enum FuzzOutcome: Sendable {
    /// The input was taken: parsed, or answered 2xx/3xx.
    case accepted
    /// The input was refused as it should be: by an error of the parser's own type, or a 4xx
    /// answer with an error code and message. `reason` is the code, e.g. `400 invalid_json`.
    case refused(String)
    /// It broke a property.
    case failed([FuzzFailure])
}

/// A broken property, with what it takes to make the case again.
public struct FuzzFailure: Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// No answer (the connection dropped) or an error of no declared type.
        case crash
        /// A 5xx answer.
        case serverError = "5xx"
        /// An error answer without a JSON error code and message.
        case unexplained
        /// A refused input changed the log or the receipts kept.
        case recordedOnRefusal = "recorded-on-refusal"
        /// A projection stopped on an event an accepted input recorded.
        case projectionFailed = "projection-failed"
    }

    public let kind: Kind
    public let target: String
    /// The case's index in the run (with the run's seed, it makes the case again).
    public let caseIndex: Int
    public let detail: String
    /// The mutations applied to the seed.
    public let steps: [String]
    /// The start of the body sent.
    public let body: String

    init(_ kind: Kind, target: String, caseIndex: Int, detail: String, steps: [String] = [], body: Data = Data()) {
        self.kind = kind
        self.target = target
        self.caseIndex = caseIndex
        self.detail = detail
        self.steps = steps
        let text = String(decoding: body.prefix(400), as: UTF8.self)
        self.body = body.count > 400 ? text + "… (\(body.count) bytes)" : text
    }

    public var description: String {
        "\(kind.rawValue) in \(target), case \(caseIndex): \(detail)" + (steps.isEmpty ? "" : "\n    mutations: " + steps.joined(separator: "; "))
            + (body.isEmpty ? "" : "\n    body: " + body.debugDescription)
    }
}

/// The counts of one target.
public struct FuzzTally: Sendable {
    public let target: String
    public internal(set) var cases = 0
    public internal(set) var accepted = 0
    /// Refusals by reason: an HTTP status and error code (`422 invalid_receipt`), or the parser's error code.
    public internal(set) var refused: [String: Int] = [:]
    /// Broken properties by kind; all zero in a clean run.
    public internal(set) var failures: [FuzzFailure.Kind: Int] = [:]
    /// Time spent in this target's cases.
    public internal(set) var seconds: Double = 0

    init(target: String) {
        self.target = target
    }

    public var refusedTotal: Int { refused.values.reduce(0, +) }

    public func count(_ kind: FuzzFailure.Kind) -> Int { failures[kind] ?? 0 }

    mutating func add(_ outcome: FuzzOutcome) {
        cases += 1
        switch outcome {
        case .accepted: accepted += 1
        case .refused(let reason): refused[reason, default: 0] += 1
        case .failed(let found): for failure in found { failures[failure.kind, default: 0] += 1 }
        }
    }
}

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
