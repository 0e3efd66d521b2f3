import LedgerProjections

/// Why a read could not be answered.
public struct ReadError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case projectionsBehind = "projections_behind"
        case unknownUser = "unknown_user"
    }

    public let code: Code
    public let message: String
    /// The position the projections have reached.
    public let position: Int64

    public static func projectionsBehind(requested: Int64, reached: Int64) -> Self {
        ReadError(
            code: .projectionsBehind,
            message: "the projections have reached log position \(reached), not yet \(requested); retry shortly",
            position: reached
        )
    }

    /// The user has nothing recorded in the app (no event at all).
    public static func unknownUser(_ user: String) -> Self {
        ReadError(code: .unknownUser, message: "user \(user) has nothing recorded in this app", position: 0)
    }

    /// Read models with no live version: not set up yet (the ledger is starting), being built (a
    /// new projection or version on a log with history, a failed one tried again) or stopped by a
    /// failure. The views are not read then:
    /// their rows would not reflect the log.
    public static func projectionsNotReady(
        missing: [ProjectionName], building: [(ProjectionName, Int64)], failed: [(ProjectionName, Int64)]
    ) -> Self {
        var parts: [String] = []
        if !missing.isEmpty {
            parts.append("\(missing.map(\.rawValue).joined(separator: ", ")) \(missing.count == 1 ? "is" : "are") being set up (the ledger is starting)")
        }
        if !failed.isEmpty {
            let names = failed.map { name, position in "\(name) (at position \(position))" }
            parts.append("\(names.joined(separator: ", ")) stopped on an error (`ledger projections status` says why)")
        }
        if !building.isEmpty {
            let names = building.map { name, position in "\(name) (at position \(position))" }
            parts.append("\(names.joined(separator: ", ")) \(building.count == 1 ? "is" : "are") still being built from the log")
        }
        return ReadError(
            code: .projectionsBehind,
            message: "the projections this read needs are not ready: \(parts.joined(separator: "; ")); retry shortly",
            position: 0
        )
    }

    public var description: String { message }
}
