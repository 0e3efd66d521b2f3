import Synchronization

/// How far the log reaches, as far as this process knows: the highest position an append
/// returned, a read found, or the projections' checkpoint an entitlements read was answered at
/// (so a server that only reads learns it too). It decides when the hottest lookups may be
/// prepared.
///
/// A prepared statement is planned once per connection for any arguments (PostgreSQL's generic
/// plan), and that plan is kept until the table's statistics change. Made while the log holds a
/// page or two, it reads the few keys of a lookup with a sequential scan, the right choice for
/// one page and a wrong one for the thousands the log has a minute later, when autovacuum has
/// not analyzed it yet (seen: 26 % of PostgreSQL's CPU per receipt in `bench http`). From
/// `preparedFrom` positions on, every plan of these statements reads by index whatever the
/// statistics say (EXPLAIN of the generic plans on a log of 9,705 events never analyzed): they
/// are prepared from then on, and planned for each call before.
final class LogReach: Sendable {
    /// 10,000 events: a log of about 700 pages, where a sequential scan costs PostgreSQL's
    /// planner more than ten index probes by a factor of five.
    static let defaultPreparedFrom: Int64 = 10_000

    private let highest = Atomic<Int64>(0)
    private let threshold: Atomic<Int64>
    init(preparedFrom: Int64 = LogReach.defaultPreparedFrom) {
        threshold = Atomic(preparedFrom)
    }

    /// Notes a position the log holds.
    func saw(_ position: Int64) {
        var current = highest.load(ordering: .relaxed)
        while position > current {
            let (exchanged, original) = highest.compareExchange(expected: current, desired: position, ordering: .relaxed)
            if exchanged { return }
            current = original
        }
    }

    /// Whether the log has reached the size from which the lookups are prepared.
    var prepares: Bool { highest.load(ordering: .relaxed) >= threshold.load(ordering: .relaxed) }

    /// Prepares the lookups from `position` on (tests prepare them from the start).
    func prepare(from position: Int64) { threshold.store(position, ordering: .relaxed) }
}
