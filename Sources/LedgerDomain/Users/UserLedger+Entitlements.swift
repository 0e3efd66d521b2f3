import Foundation

/// What a user's stream gives them: the inputs of `Entitlements`, folded from the stream itself.
///
/// The projections store these same inputs as rows (ownership, subscription periods, balances),
/// so an answer from the stream and an answer from the projections go through the one rule.
extension UserLedger {
    /// What the user may use at `instant`. `self` should be classified by `catalog` first
    /// (`classified(by:)`), so that purchases of products added to the catalog later count.
    public func entitlements(catalog: ProductCatalog, at instant: Date) -> Entitlements {
        Entitlements(at: instant, owned: ownedForever, periods: subscriptionPeriods(catalog: catalog),
                     balances: consumableBalances)
    }

    /// Non-consumables and free subscriptions: the first live purchase of each product, for ever,
    /// owned since it was bought: a restore of a purchase the stream never saw is owned since the
    /// original purchase date Apple sends with it, not since the restore.
    public var ownedForever: [Entitlements.Owned] {
        var seenProducts = Set<String>()
        return transactionsInOrder.compactMap { transaction in
            guard transaction.grantsOwnership, !transaction.isRevoked, transaction.productType.isOwnedForever,
                  seenProducts.insert(transaction.productId).inserted
            else { return nil }
            return Entitlements.Owned(productId: transaction.productId, productType: transaction.productType,
                                      originalTransactionId: transaction.originalTransactionId,
                                      ownedSince: transaction.kind == .restore ? transaction.originalPurchaseDate ?? transaction.purchaseDate : transaction.purchaseDate)
        }
    }

    /// Every paid subscription period: non-renewing ones stacked, then auto-renewable ones.
    public func subscriptionPeriods(catalog: ProductCatalog) -> [SubscriptionPeriod] {
        nonRenewingPeriods(catalog: catalog) + autoRenewablePeriods(catalog: catalog)
    }

    /// The non-renewing periods, stacked per group with the durations the catalog gave when each
    /// was bought (a later change of duration rewrites no past period).
    public func nonRenewingPeriods(catalog: ProductCatalog) -> [SubscriptionPeriod] {
        // Only products the catalog has ever called non-renewing, in the order recorded.
        var offsets: [Int] = []
        for (productId, places) in facts.orderOfProduct
        where catalog.history[productId]?.contains(where: { $0.product.type == .nonRenewing }) == true {
            offsets += places
        }
        let purchases = transactions(at: offsets.sorted()).compactMap { transaction -> NonRenewingPurchase? in
            guard transaction.kind == .purchase, !transaction.isRevoked,
                  let product = catalog.product(transaction.productId, asOf: transaction.position),
                  product.type == .nonRenewing, let duration = product.duration
            else { return nil }
            return NonRenewingPurchase(
                transactionId: transaction.transactionId, productId: transaction.productId,
                group: product.subscriptionGroup, purchaseDate: transaction.purchaseDate, duration: duration
            )
        }
        return NonRenewingSchedule.periods(of: purchases)
    }

    /// The auto-renewable periods: each non-revoked purchase or renewal's `[purchase date, expiry)`,
    /// ended early where the App Store reported it cancelled, in the subscription group the catalog
    /// gave the product when the transaction was recorded (a later move to another group rewrites no
    /// past period, so a catalog edit changes no user's rows but those of products it first defines).
    ///
    /// A billing grace period: while the latest renewal info of a subscription says the App Store
    /// is retrying the renewal's billing (`is_in_billing_retry_period`, `isInBillingRetryPeriod`)
    /// with a grace period (`grace_period_expires_date`, `gracePeriodExpiresDate`), the
    /// subscription's latest period runs until the grace period ends, as Apple keeps the customer's
    /// access until then. A renewal that comes (billing recovered) is a period of its own; an
    /// upgraded or refunded period is not extended.
    public func autoRenewablePeriods(catalog: ProductCatalog) -> [SubscriptionPeriod] {
        var periods: [SubscriptionPeriod] = []
        var latest: [String: (index: Int, upgraded: Bool)] = [:]
        for transaction in transactionsInOrder {
            guard transaction.productType == .autoRenewable, transaction.kind.isPayment || transaction.restores == nil,
                  !transaction.isRevoked,
                  let expires = transaction.periodEnd, transaction.purchaseDate.milliseconds < expires.milliseconds
            else { continue }
            periods.append(SubscriptionPeriod(
                transactionId: transaction.transactionId, productId: transaction.productId,
                group: catalog.product(transaction.productId, asOf: transaction.position)?.subscriptionGroup ?? transaction.productId,
                kind: .autoRenewable, start: transaction.purchaseDate, end: expires
            ))
            let chain = transaction.originalTransactionId
            if let held = latest[chain], periods[held.index].end.milliseconds >= expires.milliseconds { continue }
            latest[chain] = (periods.count - 1, transaction.upgradedAt != nil)
        }
        for (original, period) in latest where !period.upgraded {
            guard let info = facts.renewalInfo[original], info.isInBillingRetry, let grace = info.gracePeriodExpiresDate,
                  grace.milliseconds > periods[period.index].end.milliseconds
            else { continue }
            let held = periods[period.index]
            periods[period.index] = SubscriptionPeriod(transactionId: held.transactionId, productId: held.productId, group: held.group,
                                                       kind: held.kind, start: held.start, end: grace)
        }
        return periods
    }

    /// Every consumable the user bought or used, with purchased and consumed units. A purchase counts
    /// as a consumable's when the catalog said so when it was recorded (or first defined the product).
    public var consumableBalances: [ConsumableBalance] {
        var products = Set(consumed.keys)
        for transaction in transactionsInOrder where transaction.kind == .purchase && transaction.productType == .consumable {
            products.insert(transaction.productId)
        }
        return products.sorted().map { productId in
            let used = consumed[productId, default: 0]
            return ConsumableBalance(productId: productId, purchased: balance(of: productId) + used, consumed: used)
        }
    }
}
