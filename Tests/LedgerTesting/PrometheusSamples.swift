import LedgerHTTP
import Prometheus

/// The samples of a Prometheus text exposition, for asserting on metric values.
public struct PrometheusSamples: Sendable {
    public let text: String

    public init(text: String) {
        self.text = text
    }

    /// The current exposition of the process's registry.
    public static func current() -> PrometheusSamples {
        PrometheusSamples(text: LedgerMetrics.bootstrap().emitToString())
    }

    /// The value of the sample named `name` whose labels include `labels`, or 0 when there is none
    /// yet (a counter that was never incremented is not emitted).
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard line.hasPrefix(name + "{") || line.hasPrefix(name + " ") else { continue }
            guard labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
            guard let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            return value
        }
        return 0
    }

    /// How much `name{labels}` grew since `earlier`.
    public func increase(_ name: String, _ labels: [String: String] = [:], since earlier: PrometheusSamples) -> Double {
        value(name, labels) - earlier.value(name, labels)
    }
}
