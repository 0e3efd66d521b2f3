import LedgerDomain

/// Where a follower of the change feed left off: after a log position (every change of it
/// handled), or after one change (`chg_<position>_<seq>`: the rest of its position still to come).
public struct ChangeCursor: Hashable, Sendable, CustomStringConvertible {
    public let position: Int64
    /// The last change of `position` handled; nil: all of them.
    public let seq: Int?

    public init(position: Int64, seq: Int? = nil) {
        self.position = position
        self.seq = seq
    }

    /// A log position such as `1234`, or a change id such as `chg_1234_0`; nil for anything else.
    public init?(parsing text: String) {
        if let position = Int64(text), position >= 0 {
            self.init(position: position)
        } else if let place = ChangeRecord.place(of: text) {
            self.init(position: place.position, seq: place.seq)
        } else {
            return nil
        }
    }

    /// The seq the changes after the cursor are past, within `position`.
    public var seqBound: Int32 { seq.map(Int32.init) ?? Int32.max }

    public var description: String { seq.map { ChangeRecord.id(position: position, seq: $0) } ?? String(position) }
}
