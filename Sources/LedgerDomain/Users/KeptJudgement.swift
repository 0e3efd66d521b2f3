/// Which of a user's transactions the classifier's rules judge together.
///
/// Every rule of `TransactionClassifier` reads, besides the transaction it judges, only
/// transactions tied to it here, and the user's currency:
/// - its original transaction (`original_transaction_id`: chains, restores of an original);
/// - the transactions of its `web_order_line_item_id` (one payment per line item);
/// - what a version-1 restore pointed at;
/// - for a product owned for ever, the transactions of that product in its environment (the
///   first live purchase owns it; later ones restore it).
///
/// Ties only ever join groups (a union-find), so a group is closed under every rule of kinds and
/// refunds and is judged alone exactly as among all of the user's transactions. Prices also read
/// the other transactions of a post (a device's price goes on the newest purchase the post
/// brought): `KeptJudgement` prices again every transaction of a post one of whose transactions
/// it judged again.
struct TransactionTies: Sendable {
    enum Node: Hashable, Sendable {
        case transaction(String)
        case lineItem(String)
        case owner(TransactionClassifier.OwnerKey)
    }

    private var parent: [Node: Node] = [:]
    /// Each group's transaction ids, under the group's root.
    private var members: [Node: [String]] = [:]
    /// The transactions tied so far (a node may exist before its transaction is seen).
    private var joined: Set<String> = []

    /// The group `node` is in (a group of its own when it was never tied).
    mutating func root(of node: Node) -> Node {
        var top = node
        while let next = parent[top], next != top { top = next }
        var walk = node
        while let next = parent[walk], next != top {
            parent[walk] = top
            walk = next
        }
        return top
    }

    /// Ties transaction `id` to `nodes`; returns the root of its group.
    @discardableResult
    mutating func tie(_ id: String, to nodes: [Node]) -> Node {
        let node = Node.transaction(id)
        if parent[node] == nil {
            parent[node] = node
            members[node] = []
        }
        var top = root(of: node)
        // A transaction another one named (as its original, say) before it was seen itself.
        if joined.insert(id).inserted { members[top, default: []].append(id) }
        for other in nodes {
            if parent[other] == nil {
                parent[other] = other
                members[other] = []
            }
            let otherTop = root(of: other)
            guard otherTop != top else { continue }
            // The larger group takes the smaller one in.
            let (keep, fold) = members[top, default: []].count >= members[otherTop, default: []].count ? (top, otherTop) : (otherTop, top)
            parent[fold] = keep
            members[keep, default: []] += members.removeValue(forKey: fold) ?? []
            top = keep
        }
        return top
    }

    func members(of root: Node) -> [String] { members[root] ?? [] }

    /// Whether `id` was tied, or named by a transaction that was.
    func knows(_ id: String) -> Bool { parent[.transaction(id)] != nil }

    /// The nodes an observation is tied to, with the type the catalog gives it.
    static func nodes(of observation: TransactionFacts.Observed, type: ProductType) -> [Node] {
        var nodes: [Node] = []
        let fields = observation.fields
        if let original = fields.originalTransactionId, original != observation.transactionId { nodes.append(.transaction(original)) }
        if let lineItem = fields.webOrderLineItemId { nodes.append(.lineItem(lineItem)) }
        if let pointsAt = observation.legacy?.pointsAt { nodes.append(.transaction(pointsAt)) }
        if type.isOwnedForever {
            nodes.append(.owner(TransactionClassifier.OwnerKey(environment: observation.environment, productId: fields.productId ?? "")))
        }
        return nodes
    }
}

/// A user's transactions as judged last time, and what they were judged with, so that the next
/// judgement looks again only at the groups (`TransactionTies`) whose facts changed since.
///
/// A group whose only changes are transactions recorded since, which cannot change how its
/// earlier transactions were judged (`TransactionClassifier.judge(appended:...)` says when), has
/// only those judged, after the rest: buying a product owned for ever again costs the same however
/// often it was bought before.
///
/// A cache, not state: what it holds is what `TransactionClassifier.classify` gives for the same
/// facts, catalog, rules and currency, and any other catalog, rules or currency starts it over.
/// It therefore takes no part in comparing ledgers (`==` holds for any two, `hash` adds nothing).
struct KeptJudgement: Hashable, Sendable {
    private var catalog: ProductCatalog?
    private var rules: TransactionClassifier.Rules?
    private var currencies = CurrencyTimeline()
    private var ties = TransactionTies()
    /// The owner of each product owned for ever, as last judged.
    private var owners: [TransactionClassifier.OwnerKey: String] = [:]
    /// Where each transaction is in `facts.order`.
    private var index: [String: Int] = [:]
    /// How much of `facts.order` and `facts.changes` has been judged.
    private var ordered = 0
    private var changed = 0
    /// Whether `ties` and `index` cover the first `ordered` transactions.
    private var tied = false

    static func == (lhs: KeptJudgement, rhs: KeptJudgement) -> Bool { true }
    func hash(into hasher: inout Hasher) {}

    /// Brings `transactions` up to `facts`: every transaction judged, as `classify` would.
    mutating func judge(
        _ facts: TransactionFacts, catalog: ProductCatalog, rules: TransactionClassifier.Rules,
        into transactions: inout [String: UserLedger.Transaction]
    ) {
        // The facts only grow, and they travel with this judgement in one `UserLedger`.
        if self.catalog != catalog || self.rules != rules {
            self = KeptJudgement()
            self.catalog = catalog
            self.rules = rules
            currencies = facts.currencies
            judgeAll(facts, catalog: catalog, rules: rules, into: &transactions, tying: false)
            return
        }
        // The user's currency decides nothing but prices (`TransactionClassifier.price`): when its
        // timeline changes, the transactions bought from the first instant it answers otherwise
        // are priced again, not every transaction judged again (a user whose device reports
        // another currency now and then would have had the whole history judged at each post).
        var repriced: [String] = []
        if currencies != facts.currencies {
            if let since = currencies.firstDifference(from: facts.currencies) {
                repriced = transactions.values.filter { $0.purchaseDate.milliseconds >= since }.map(\.transactionId)
            }
            currencies = facts.currencies
        }
        guard changed < facts.changes.count || ordered < facts.order.count || !repriced.isEmpty else { return }
        if !tied {
            // Ties are made when first needed, so a fold judged once (a rebuild) never pays for
            // them; made from the facts as they are now, they need a judgement of the same facts.
            judgeAll(facts, catalog: catalog, rules: rules, into: &transactions, tying: true)
            return
        }
        let before = ordered
        var named: Set<String> = []
        for offset in ordered..<facts.order.count {
            let id = facts.order[offset]
            if ties.knows(id) { named.insert(id) }
            tie(id, at: offset, facts: facts, catalog: catalog)
        }
        // Each changed transaction under its group, in the order of the changes.
        var groups: [TransactionTies.Node] = []
        var changedIn: [TransactionTies.Node: [String]] = [:]
        for id in facts.changes[changed...] {
            guard let offset = index[id] else { continue }  // a revocation of a transaction not seen yet
            // Fields observed again may name another original, line item or product: tie those too.
            if offset < before { tie(id, at: offset, facts: facts, catalog: catalog) }
            let group = ties.root(of: .transaction(id))
            if changedIn[group] == nil { groups.append(group) }
            changedIn[group, default: []].append(id)
        }
        ordered = facts.order.count
        changed = facts.changes.count

        func appendable(_ id: String) -> Bool {
            guard let offset = index[id], offset >= before, !named.contains(id), let observation = facts.observed[id],
                  TransactionClassifier.productType(of: observation, catalog: catalog) != .autoRenewable else { return false }
            return facts.revocations[id].map { $0.at.position > observation.first.position } ?? true
        }
        // Kinds and refunds: a group's new transactions after the rest when they can be, else
        // each group a changed transaction is in, judged again as a whole.
        var judged: [String: UserLedger.Transaction] = [:]
        var appended: [String] = []
        for group in groups {
            let ids = changedIn[group] ?? []
            if ids.allSatisfy(appendable) {
                appended += ids
                continue
            }
            let observations = ties.members(of: group).compactMap { facts.observed[$0] }
                .sorted { index[$0.transactionId, default: 0] < index[$1.transactionId, default: 0] }
            var groupOwners: [TransactionClassifier.OwnerKey: String] = [:]
            let groupJudged = TransactionClassifier.judge(observations, facts: facts, catalog: catalog, rules: rules,
                                                          pricing: false, owners: &groupOwners)
            // A product's owner is in the product's group: the group's owners replace those it had.
            owners = owners.filter { groupJudged[$0.value] == nil }.merging(groupOwners) { $1 }
            judged.merge(groupJudged) { $1 }
        }
        if !appended.isEmpty {
            let observations = Set(appended).compactMap { facts.observed[$0] }
                .sorted { index[$0.transactionId, default: 0] < index[$1.transactionId, default: 0] }
            // Into the transactions as they stand: a refund of a restore may refund an earlier one.
            TransactionClassifier.judge(appended: observations, catalog: catalog, facts: facts, owners: &owners, into: &transactions)
            for observation in observations { judged[observation.transactionId] = transactions[observation.transactionId] }
        }
        for id in repriced where judged[id] == nil { judged[id] = transactions[id]?.unpriced }
        // Prices: those transactions, and every other transaction of their posts.
        for id in Array(judged.keys) {
            guard let post = facts.observed[id]?.post else { continue }
            for other in facts.posts[post].firstObserved where judged[other] == nil {
                judged[other] = transactions[other]?.unpriced
            }
        }
        let observations = judged.keys.compactMap { facts.observed[$0] }
        TransactionClassifier.price(observations, facts: facts, catalog: catalog, into: &judged)
        for (id, transaction) in judged { transactions[id] = transaction }
    }

    /// Every transaction judged from the facts, and with `tying`, tied into groups.
    private mutating func judgeAll(
        _ facts: TransactionFacts, catalog: ProductCatalog, rules: TransactionClassifier.Rules,
        into transactions: inout [String: UserLedger.Transaction], tying: Bool
    ) {
        owners = [:]
        transactions = TransactionClassifier.judge(facts.order.compactMap { facts.observed[$0] }, facts: facts, catalog: catalog,
                                                   rules: rules, owners: &owners)
        if tying {
            for (offset, id) in facts.order.enumerated() { tie(id, at: offset, facts: facts, catalog: catalog) }
            tied = true
        }
        ordered = facts.order.count
        changed = facts.changes.count
    }

    private mutating func tie(_ id: String, at offset: Int, facts: TransactionFacts, catalog: ProductCatalog) {
        guard let observation = facts.observed[id] else { return }
        index[id] = offset
        let type = TransactionClassifier.productType(of: observation, catalog: catalog)
        ties.tie(id, to: TransactionTies.nodes(of: observation, type: type))
    }
}
