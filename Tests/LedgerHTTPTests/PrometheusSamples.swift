import LedgerHTTP
import Prometheus

/// The samples of a Prometheus text exposition, for asserting on metric values.
struct PrometheusSamples {
    let text: String

    /// The current exposition of the process's registry.
    static func current() -> PrometheusSamples {
        PrometheusSamples(text: LedgerMetrics.bootstrap().emitToString())
    }

    /// The value of the sample named `name` whose labels include `labels`, or 0 when there is none
    /// yet (a counter that was never incremented is not emitted).
    func value(_ name: String, _ labels: [String: String] = [:]) -> Double {
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard line.hasPrefix(name + "{") || line.hasPrefix(name + " ") else { continue }
            guard labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) else { continue }
            guard let value = line.split(separator: " ").last.flatMap({ Double($0) }) else { continue }
            return value
        }
        return 0
    }

    /// How much `name{labels}` grew since `earlier`.
    func increase(_ name: String, _ labels: [String: String] = [:], since earlier: PrometheusSamples) -> Double {
        value(name, labels) - earlier.value(name, labels)
    }
}
