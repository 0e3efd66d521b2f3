import Foundation

/// A stored event type this code does not know: a projection stops on it rather than skip it.
public struct UnknownEventType: Error, Hashable, Sendable, CustomStringConvertible {
    public let type: String

    public init(type: String) {
        self.type = type
    }

    public var description: String {
        "event type '\(type)' is not known to this version of the ledger: upgrade it before replaying this log"
    }
}
