import LedgerApplication
import LedgerProjections
import PostgresNIO

extension PostgresQuery.StringInterpolation {
    /// A projection's name, bound as text.
    mutating func appendInterpolation(_ name: ProjectionName) {
        appendInterpolation(name.rawValue)
    }

    /// A projection version's state, bound as text.
    mutating func appendInterpolation(_ state: ProjectionState) {
        appendInterpolation(state.rawValue)
    }

    /// Projection names, bound as a text array.
    mutating func appendInterpolation(_ names: [ProjectionName]) {
        appendInterpolation(names.map(\.rawValue))
    }
}
