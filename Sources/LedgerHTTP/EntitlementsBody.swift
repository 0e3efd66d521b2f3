import Foundation
import LedgerDomain
import LedgerStore

/// What a user may use at an instant, in the one JSON shape the ledger answers with: after a
/// receipt or a restore, from `GET …/entitlements` and from `ledger query entitlements`. It maps
/// the domain's `Entitlements` and decides nothing itself.
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
        let activeUntil: Date?
        let expiresAt: Date
    }

    struct Consumable: Encodable, Sendable {
        let productId: String
        let balance: Int64
    }

    let userId: String
    let at: Date
    /// The log position the answer reflects.
    let position: Int64
    let owned: [Owned]
    let subscriptions: [Subscription]
    let consumables: [Consumable]

    public init(userId: String, position: Int64, _ entitlements: Entitlements) {
        self.userId = userId
        self.at = entitlements.at
        self.position = position
        owned = entitlements.owned.map {
            Owned(productId: $0.productId, productType: $0.productType.rawValue, originalTransactionId: $0.originalTransactionId,
                  ownedSince: $0.ownedSince)
        }
        subscriptions = entitlements.subscriptions.map {
            Subscription(productId: $0.productId, group: $0.group, kind: $0.kind.rawValue, active: $0.isActive,
                         activeUntil: $0.activeUntil, expiresAt: $0.expiresAt)
        }
        consumables = entitlements.consumables.map { Consumable(productId: $0.productId, balance: Int64($0.balance)) }
    }

    /// After a command: the user's stream as the command left it (judged with `catalog`).
    init(userId: String, position: Int64, state: UserLedger, catalog: ProductCatalog, at instant: Date = Date()) {
        self.init(userId: userId, position: position, state.entitlements(catalog: catalog, at: instant))
    }
}
