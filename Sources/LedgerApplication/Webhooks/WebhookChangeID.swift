import LedgerDomain

/// A change's id as the feed and the webhooks name it: `chg_<position>_<seq>` (`ChangeRecord.id`).
public struct WebhookChangeID: Sendable, Hashable, CustomStringConvertible {
    public let position: Int64
    public let seq: Int

    public init(position: Int64, seq: Int) {
        self.position = position
        self.seq = seq
    }

    /// The change `text` names; nil for anything but `chg_<position ≥ 1>_<seq ≥ 0>`.
    public init?(_ text: String) {
        guard let place = ChangeRecord.place(of: text), place.seq <= Int(Int32.max) else { return nil }
        self.init(position: place.position, seq: place.seq)
    }

    public var description: String { ChangeRecord.id(position: position, seq: seq) }
}
