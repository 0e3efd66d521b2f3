import LedgerApplication
import LedgerDomain
import LedgerProjections

/// `UserReads` over an `InMemoryEventStore`: the projections' own folds applied to the user's
/// stream at each read, so the rows are what the projection runner would write, always caught up
/// with the log (the checkpoint is the log's last position).
public struct InMemoryUserReads: UserReads {
    let store: InMemoryEventStore
    let reader: UserStreamReader

    public init(store: InMemoryEventStore) {
        self.store = store
        self.reader = UserStreamReader(store: store)
    }

    public func checkpoint(of projections: [ProjectionName]) async throws -> Int64 {
        await store.events.last?.position ?? 0
    }

    public func waitForProjections(_ projections: [ProjectionName], toReach position: Int64, timeout: Duration) async throws -> Int64 {
        let reached = try await checkpoint(of: projections)
        guard reached >= position else { throw ReadError.projectionsBehind(requested: position, reached: reached) }
        return reached
    }

    public func entitlementRows(app: String, user: String, at position: Int64) async throws -> EntitlementRows {
        let state = try await reader.state(app: app, user: user, upToPosition: position)
        let catalog = try await reader.catalog(app: app, upToPosition: position)
        var rows = EntitlementRows()
        rows.userExists = state.version > 0
        rows.owned = OwnershipProjection.rows(app: app, user: user, state: state, catalog: catalog).map {
            EntitlementRows.Owned(productId: $0.productId, productType: $0.productType, originalTransactionId: $0.originalTransactionId,
                                  ownedSince: $0.ownedSince, expiresAt: $0.expiresAt)
        }
        rows.periods = SubscriptionPeriodsProjection.rows(app: app, user: user, state: state, catalog: catalog).map {
            EntitlementRows.Period(transactionId: $0.period.transactionId, originalTransactionId: $0.originalTransactionId,
                                   productId: $0.period.productId, group: $0.period.group, kind: $0.period.kind, start: $0.period.start,
                                   end: $0.period.end)
        }
        rows.balances = ConsumableBalancesProjection.rows(app: app, user: user, state: state, catalog: catalog).map {
            EntitlementRows.Balance(productId: $0.balance.productId, purchased: Int64($0.balance.purchased), consumed: Int64($0.balance.consumed),
                                    balance: Int64($0.balance.balance), overdrawn: $0.balance.isOverdrawn)
        }
        return rows
    }
}
