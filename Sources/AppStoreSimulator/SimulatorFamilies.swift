/// Family Sharing: which test users share an organizer's purchases, and which copy each member has of
/// which of the organizer's transactions.
///
/// A user is in one family at most, as an organizer or as a member, as with Apple IDs.
struct SimulatorFamilies: Sendable {
    private struct CopyKey: Hashable, Sendable {
        let member: String
        let source: String
    }

    /// Member → organizer.
    private var organizers: [String: String] = [:]
    /// Users who organize a family with at least one member.
    private var organizing: Set<String> = []
    /// A member's copy of an organizer's transaction.
    private var copies: [CopyKey: String] = [:]
    /// A member's shared subscription, by the organizer's original transaction id.
    private var sharedSubscriptions: [CopyKey: String] = [:]

    func organizer(of member: String) -> String? { organizers[member] }

    /// Adds `member` to `organizer`'s family; `false` when it is there already.
    mutating func link(organizer: String, member: String) throws -> Bool {
        guard organizer != member else {
            throw SimulatorError.badRequest("a user cannot join their own family: give two different users")
        }
        if organizers[member] == organizer { return false }
        if let other = organizers[member] {
            throw SimulatorError.conflict("\(member) is in \(other)'s family already")
        }
        if organizing.contains(member) {
            throw SimulatorError.conflict("\(member) organizes a family of their own, so cannot join another")
        }
        if let theirs = organizers[organizer] {
            throw SimulatorError.conflict("\(organizer) is a member of \(theirs)'s family, so cannot organize one")
        }
        organizers[member] = organizer
        organizing.insert(organizer)
        return true
    }

    func copy(of source: String, for member: String) -> String? {
        copies[CopyKey(member: member, source: source)]
    }

    mutating func recordCopy(_ copy: String, of source: String, for member: String) {
        copies[CopyKey(member: member, source: source)] = copy
    }

    func sharedSubscription(of buyerOriginal: String, for member: String) -> String? {
        sharedSubscriptions[CopyKey(member: member, source: buyerOriginal)]
    }

    mutating func recordSharedSubscription(_ original: String, of buyerOriginal: String, for member: String) {
        sharedSubscriptions[CopyKey(member: member, source: buyerOriginal)] = original
    }
}
