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
        case owner(StoreEnvironment, String)
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

    /// The nodes an observation is tied to, with the type the catalog gives it.
    static func nodes(of observation: TransactionFacts.Observed, type: ProductType) -> [Node] {
        var nodes: [Node] = []
        let fields = observation.fields
        if let original = fields.originalTransactionId, original != observation.transactionId { nodes.append(.transaction(original)) }
        if let lineItem = fields.webOrderLineItemId { nodes.append(.lineItem(lineItem)) }
        if let pointsAt = observation.legacy?.pointsAt { nodes.append(.transaction(pointsAt)) }
        if type.isOwnedForever { nodes.append(.owner(observation.environment, fields.productId ?? "")) }
        return nodes
    }
}

/// A user's transactions as judged last time, and what they were judged with, so that the next
/// judgement looks again only at the groups (`TransactionTies`) whose facts changed since.
///
/// A cache, not state: what it holds is what `TransactionClassifier.classify` gives for the same
/// facts, catalog, rules and currency, and any other catalog, rules or currency starts it over.
/// It therefore takes no part in comparing ledgers (`==` holds for any two, `hash` adds nothing).
struct KeptJudgement: Hashable, Sendable {
    private var catalog: ProductCatalog?
    private var rules: TransactionClassifier.Rules?
    private var currency: String?
    private var ties = TransactionTies()
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
        if self.catalog != catalog || self.rules != rules || currency != facts.userCurrency {
            self = KeptJudgement()
            self.catalog = catalog
            self.rules = rules
            currency = facts.userCurrency
            judgeAll(facts, catalog: catalog, rules: rules, into: &transactions, tying: false)
            return
        }
        guard changed < facts.changes.count || ordered < facts.order.count else { return }
        if !tied {
            // Ties are made when first needed, so a fold judged once (a rebuild) never pays for
            // them; made from the facts as they are now, they need a judgement of the same facts.
            judgeAll(facts, catalog: catalog, rules: rules, into: &transactions, tying: true)
            return
        }
        for offset in ordered..<facts.order.count { tie(facts.order[offset], at: offset, facts: facts, catalog: catalog) }
        var dirty: [String] = []
        for id in facts.changes[changed...] {
            guard let offset = index[id] else { continue }  // a revocation of a transaction not seen yet
            // Fields observed again may name another original, line item or product: tie those too.
            if offset < ordered { tie(id, at: offset, facts: facts, catalog: catalog) }
            dirty.append(id)
        }
        ordered = facts.order.count
        changed = facts.changes.count
        // Kinds and refunds: each group a changed transaction is in, judged again as a whole.
        var judgedGroups = Set<TransactionTies.Node>()
        var judged: [String: UserLedger.Transaction] = [:]
        for id in dirty {
            let group = ties.root(of: .transaction(id))
            guard judgedGroups.insert(group).inserted else { continue }
            let observations = ties.members(of: group).compactMap { facts.observed[$0] }
                .sorted { index[$0.transactionId, default: 0] < index[$1.transactionId, default: 0] }
            judged.merge(TransactionClassifier.judge(observations, facts: facts, catalog: catalog, rules: rules, pricing: false)) { $1 }
        }
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
        transactions = TransactionClassifier.judge(facts.order.compactMap { facts.observed[$0] }, facts: facts, catalog: catalog, rules: rules)
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
