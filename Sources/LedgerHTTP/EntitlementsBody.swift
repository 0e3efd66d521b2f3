import Foundation
import LedgerDomain
import LedgerStore

/// What a user may use at an instant, in the one shape the ledger answers with: after a receipt
/// (from the stream just written), from `GET …/entitlements` (from the projections) and from
/// `ledger query entitlements` (from the stream, at any past point).
public struct EntitlementsBody: Encodable, Sendable {
    struct Owned: Encodable, Sendable {
        let productId: String
        let productType: String
        let originalTransactionId: String
        let ownedSince: Date
    }

    struct Subscription: Encodable, Sendable {
        let productId: String
        let group: String
        let kind: String
        let active: Bool
        /// End of the unbroken run of periods covering `at` (stacked non-renewing periods count as one run).
        let activeUntil: Date?
        /// The end of the last period bought.
        let expiresAt: Date
    }

    struct Consumable: Encodable, Sendable {
        let productId: String
        let balance: Int64
    }

    /// A subscription period with its kind (non_renewing or auto_renewable).
    struct Period: Sendable {
        let kind: String
        let productId: String
        let group: String
        let start: Date
        let end: Date
    }

    let userId: String
    let at: Date
    /// The log position the answer reflects.
    let position: Int64
    let owned: [Owned]
    let subscriptions: [Subscription]
    let consumables: [Consumable]

    init(userId: String, at: Date, position: Int64, owned: [Owned], periods: [Period], balances: [(String, Int64)]) {
        self.userId = userId
        self.at = at
        self.position = position
        self.owned = owned
        self.consumables = balances.filter { $0.1 > 0 }.map { Consumable(productId: $0.0, balance: $0.1) }
        var byProduct: [String: [Period]] = [:]
        for period in periods { byProduct["\(period.kind)\u{1F}\(period.productId)", default: []].append(period) }
        subscriptions = byProduct.values.map { periods in
            let sorted = periods.sorted { $0.start < $1.start }
            let groupPeriods = Self.runs(of: sorted)
            let until = groupPeriods.first { $0.start <= at && at < $0.end }?.end
            return Subscription(productId: sorted[0].productId, group: sorted[0].group, kind: sorted[0].kind,
                                active: until != nil, activeUntil: until, expiresAt: sorted.map(\.end).max()!)
        }.sorted { ($0.kind, $0.productId) < ($1.kind, $1.productId) }
    }

    /// Periods merged where one starts by the time the previous ends.
    private static func runs(of sorted: [Period]) -> [(start: Date, end: Date)] {
        var runs: [(start: Date, end: Date)] = []
        for period in sorted {
            if let last = runs.last, period.start <= last.end {
                runs[runs.count - 1].end = max(last.end, period.end)
            } else {
                runs.append((period.start, period.end))
            }
        }
        return runs
    }

    /// From a stream's fold, as a command left it.
    public init(userId: String, state: UserLedger, catalog: ProductCatalog, position: Int64, at: Date = Date()) {
        let classified = state.classified(by: catalog)
        let entitlements = Entitlements(of: classified, catalog: catalog, at: at)
        let periods = UserDecisions.nonRenewingPeriods(of: classified, catalog: catalog).map {
            Period(kind: "non_renewing", productId: $0.productId, group: $0.group, start: $0.start, end: $0.end)
        } + UserDecisions.autoRenewablePeriods(of: classified, catalog: catalog).map {
            Period(kind: "auto_renewable", productId: $0.productId, group: $0.group, start: $0.start, end: $0.end)
        }
        var consumables = Set<String>()
        for transaction in classified.transactionsInOrder where transaction.productType == .consumable { consumables.insert(transaction.productId) }
        self.init(
            userId: userId, at: at, position: position,
            owned: entitlements.owned.map {
                Owned(productId: $0.productId, productType: classified.transactions[$0.originalTransactionId]?.productType.rawValue ?? "non_consumable",
                      originalTransactionId: $0.originalTransactionId, ownedSince: $0.purchaseDate)
            },
            periods: periods,
            balances: consumables.sorted().map { ($0, Int64(classified.balance(of: $0))) }
        )
    }

    /// From the projections' rows.
    init(userId: String, at: Date, position: Int64, owned: [UserReadModels.Owned], periods: [UserReadModels.Period], balances: [UserReadModels.Balance]) {
        self.init(
            userId: userId, at: at, position: position,
            owned: owned.filter { $0.productType == "non_consumable" || $0.productType == "free_subscription" }.map {
                Owned(productId: $0.productId, productType: $0.productType, originalTransactionId: $0.originalTransactionId, ownedSince: $0.ownedSince)
            },
            periods: periods.map { Period(kind: $0.kind, productId: $0.productId, group: $0.group, start: $0.start, end: $0.end) },
            balances: balances.map { ($0.productId, $0.balance) }
        )
    }
}
