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
