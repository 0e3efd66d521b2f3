import LedgerDomain

/// A read model derived from the log: a name, a version, the events it reads and a pure fold.
///
/// The fold is the whole definition of the projection's state: replaying the log from position 0
/// through `apply` rebuilds it, which is how a fixed projection replaces a buggy one. Changing the
/// fold means bumping `version`, so the runner builds the new version beside the live one.
public protocol Projection: Sendable {
    associatedtype State: Sendable

    /// Stable name of the read model, e.g. `ownership`; its tables and view carry it.
    static var name: String { get }
    /// Bumped whenever `apply` changes what it derives.
    static var version: Int { get }
    /// The stored event type names (`PurchaseRecorded.v1`, ...) the fold reads; others are skipped.
    static var handledEventTypes: Set<String> { get }

    /// Folds one event into the state. Pure: no I/O, no clock, the same answer every time.
    static func apply(_ event: RecordedEvent, to state: inout State) throws
}
