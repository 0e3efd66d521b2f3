import Foundation

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
        /// A signed payload answered past its deadline each time it was sent (a costly chain, a hang).
        case slow
        /// A signed payload sent again (after a slow answer) recorded more than its first try.
        case recordedTwice = "recorded-twice"
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
