/// A change's id as the feed and the webhooks name it: `chg_<position>_<seq>`.
public struct WebhookChangeID: Sendable, Hashable, CustomStringConvertible {
    public let position: Int64
    public let seq: Int

    public init(position: Int64, seq: Int) {
        self.position = position
        self.seq = seq
    }

    /// The change `text` names; nil for anything but `chg_<position ≥ 1>_<seq ≥ 0>`.
    public init?(_ text: String) {
        let parts = text.split(separator: "_", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == "chg", parts[1].allSatisfy(\.isASCII), parts[2].allSatisfy(\.isASCII),
              let position = Int64(parts[1]), position >= 1, let seq = Int(parts[2]), seq >= 0, seq <= Int(Int32.max)
        else { return nil }
        self.init(position: position, seq: seq)
    }

    public var description: String { "chg_\(position)_\(seq)" }
}
