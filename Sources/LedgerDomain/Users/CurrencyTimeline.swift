import Foundation

/// A user's App Store currency over time: each currency a device reported with a receipt (at
/// Apple's answer) or Apple signed with a price (at the purchase), so that a transaction the
/// catalog prices gets the currency in force when it happened, whatever the user posts later.
///
/// The currency at an instant is the one said last at or before it; before anything was said,
/// the first one said. A user who moves from the United States to France keeps last year's
/// renewals in dollars.
public struct CurrencyTimeline: Hashable, Sendable {
    /// The instants the currency changed, in time order, each with the currency from then on; the
    /// first entry's instant does not matter (the first currency also holds before it).
    public private(set) var changes: [Change] = []
    /// Every currency said, by instant: what `changes` is drawn from.
    private var said: [Change] = []

    public struct Change: Hashable, Sendable {
        public let milliseconds: Int64
        public let currency: String
    }

    public init() {}

    /// Notes that the user's currency was `currency` at `instant`.
    mutating func add(_ currency: String, at instant: Date) {
        let change = Change(milliseconds: instant.milliseconds, currency: currency)
        // Where it goes in time order (usually at the end: posts come in time order).
        var low = 0, high = said.count
        while low < high {
            let middle = (low + high) / 2
            if (said[middle].milliseconds, said[middle].currency) <= (change.milliseconds, change.currency) { low = middle + 1 } else { high = middle }
        }
        guard low == 0 || said[low - 1] != change else { return }
        said.insert(change, at: low)
        // Said again where it already held: the changes stay as they are.
        let before = low > 0 ? said[low - 1].currency : nil, after = low + 1 < said.count ? said[low + 1].currency : nil
        if (before ?? after) == currency && (after ?? before) == currency { return }
        var runs: [Change] = []
        for entry in said where runs.last?.currency != entry.currency { runs.append(entry) }
        if let first = runs.first { runs[0] = Change(milliseconds: Int64.min, currency: first.currency) }
        changes = runs
    }

    /// The currency in force at `instant`, nil when none was ever said.
    public func currency(at instant: Date) -> String? {
        let at = instant.milliseconds
        return changes.last { $0.milliseconds <= at }?.currency ?? changes.first?.currency
    }

    /// The first instant (in milliseconds) from which `self` and `other` may name different
    /// currencies, `Int64.min` when they may differ from the start; nil when they name the same
    /// currency at every instant.
    func firstDifference(from other: CurrencyTimeline) -> Int64? {
        let common = min(changes.count, other.changes.count)
        for index in 0..<common where changes[index] != other.changes[index] {
            return index == 0 ? Int64.min : min(changes[index].milliseconds, other.changes[index].milliseconds)
        }
        guard changes.count != other.changes.count else { return nil }
        // One goes on where the other stops: alike until its next change.
        let longer = changes.count > common ? changes : other.changes
        return common == 0 ? Int64.min : longer[common].milliseconds
    }

    /// Only the changes make two timelines answer alike: what they were drawn from does not.
    public static func == (lhs: CurrencyTimeline, rhs: CurrencyTimeline) -> Bool { lhs.changes == rhs.changes }
    public func hash(into hasher: inout Hasher) { hasher.combine(changes) }
}
