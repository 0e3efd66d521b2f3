import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: Subscriptions

    /// The state of the subscription with this original transaction id, own or shared.
    func subscriptionStatus(originalTransactionId: String) throws -> SimulatorSubscriptionStatus {
        let key = try requireSubscription(originalTransactionId, toChange: false)
        materialize(key)
        return try status(originalTransactionId)
    }

    /// Makes the subscription's renewals fail from now on (`failing`), or work again.
    ///
    /// While failing, a period that ends is not renewed: the subscription is in billing retry, and
    /// with `gracePeriodDays` in a grace period that long from the end of the period (real days, in
    /// both environments). When billing works again and the subscription had lapsed, the next period
    /// starts now, as a renewal.
    func setBilling(originalTransactionId: String, failing: Bool, gracePeriodDays: Int?) throws -> SimulatorSubscriptionStatus {
        if let gracePeriodDays {
            guard failing else { throw SimulatorError.badRequest("gracePeriodDays goes with \"failing\": true") }
            guard (1...60).contains(gracePeriodDays) else {
                throw SimulatorError.badRequest("gracePeriodDays is from 1 to 60 (App Store Connect offers 3, 16 and 28)")
            }
        }
        let key = try requireSubscription(originalTransactionId, toChange: true)
        materialize(key)
        guard var subscription = subscriptions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        let now = self.now
        var made: [SimulatorTransaction] = []
        if failing {
            subscription.billingIssue = .init(gracePeriodDays: gracePeriodDays)
        } else if subscription.billingIssue != nil {
            let lapsed = subscription.latestEnd(in: environment) <= now
            subscription.billingIssue = nil
            if lapsed, subscription.renews(in: environment) {
                made.append(renew(&subscription, startingAt: now, restart: true))
            }
        }
        subscriptions[originalTransactionId] = subscription
        if failing, let latest = subscription.latestId.flatMap({ transactions[$0] }) {
            notify("DID_FAIL_TO_RENEW", gracePeriodDays == nil ? nil : "GRACE_PERIOD", about: latest)
        }
        var answer = try status(originalTransactionId)
        answer.newTransactions = made
        return answer
    }

    /// Turns auto-renew off (the customer cancels: the subscription ends with its current period)
    /// or on again while the period still runs.
    func setAutoRenew(originalTransactionId: String, enabled: Bool) throws -> SimulatorSubscriptionStatus {
        let key = try requireSubscription(originalTransactionId, toChange: true)
        materialize(key)
        guard var subscription = subscriptions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        if enabled, !subscription.autoRenewEnabled, subscription.latestEnd(in: environment) <= now {
            throw SimulatorError.conflict(
                "subscription \(originalTransactionId) lapsed at \(Self.iso(subscription.latestEnd(in: environment))): buy \(subscription.plan.productId) again"
            )
        }
        let changed = subscription.autoRenewEnabled != enabled
        subscription.autoRenewEnabled = enabled
        subscriptions[originalTransactionId] = subscription
        if changed, let latest = subscription.latestId.flatMap({ transactions[$0] }) {
            notify("DID_CHANGE_RENEWAL_STATUS", enabled ? "AUTO_RENEW_ENABLED" : "AUTO_RENEW_DISABLED", about: latest)
        }
        return try status(originalTransactionId)
    }

    // MARK: Internals: subscriptions

    /// A purchase of an auto-renewable: a change of the group's live subscription if there is one,
    /// else a new subscription, with the product's introductory offer if it is the user's first in the group.
    func subscribe(_ key: UserApp, to product: SimulatedProduct, in app: App, at now: Date) throws -> Purchase {
        let group = product.subscriptionGroup ?? product.productId
        let plan = SimulatorSubscription.Plan(productId: product.productId, duration: product.duration ?? .oneMonth)
        let own = (subscriptionsByUser[key] ?? []).compactMap { subscriptions[$0] }.filter { $0.group == group }
        if let live = own.first(where: { isLive($0) }) {
            return try changePlan(live, to: plan, level: product.serviceLevel, in: app, at: now)
        }
        let offer = own.isEmpty ? product.introOffer : nil
        let id = takeTransactionId()
        var subscription = SimulatorSubscription(original: id, userId: key.userId, bundleId: key.bundleId, group: group, plan: plan, at: now)
        subscription.periodsSinceAnchor = offer?.firstTransactionPeriods ?? 1
        subscription.introPeriodsLeft = offer?.kind == .payAsYouGo ? (offer?.periods ?? 1) - 1 : 0
        let transaction = record(SimulatorTransaction(
            transactionId: id, originalTransactionId: id, userId: key.userId, bundleId: key.bundleId,
            productId: plan.productId, productType: .autoRenewable, quantity: 1,
            purchaseDate: now, originalPurchaseDate: now, expiresDate: subscription.latestEnd(in: environment),
            webOrderLineItemId: takeWebOrderId(), subscriptionGroupIdentifier: subscription.groupIdentifier,
            isTrialPeriod: offer?.kind == .freeTrial, isInIntroOfferPeriod: offer.map { $0.kind != .freeTrial } ?? false
        ))
        subscription.periodIds = [id]
        subscriptions[id] = subscription
        subscriptionsByUser[key, default: []].append(id)
        return Purchase(transaction: transaction, change: nil, createdTransaction: true)
    }

    /// Another product of the group bought while `live` runs, as the App Store ranks it: to a higher
    /// level (smaller number), or to the same level and duration, at once: the current period ends now
    /// (`is_upgraded`, `cancellation_date`) and a period of the new product starts, with a new web
    /// order. Else at the next renewal, which will be of the new product (`auto_renew_product_id`).
    func changePlan(
        _ live: SimulatorSubscription,
        to plan: SimulatorSubscription.Plan,
        level: Int,
        in app: App,
        at now: Date
    ) throws -> Purchase {
        var subscription = live
        guard let latestId = subscription.latestId, var latest = transactions[latestId] else {
            throw SimulatorError.notFound("subscription \(live.originalTransactionId) has no period")
        }
        guard Self.isActive(latest, at: now) else {
            let route = "POST /admin/subscriptions/\(live.originalTransactionId)"
            throw SimulatorError.conflict(
                "subscription \(live.originalTransactionId) is in billing retry: make billing work (\(route)/billing {\"failing\": false}) or turn auto-renew off (\(route)/auto-renew {\"enabled\": false}) first"
            )
        }
        guard plan.productId != subscription.plan.productId else {
            throw SimulatorError.conflict(
                "\(live.userId) is subscribed to \(plan.productId) until \(latest.expiresDate.map(Self.iso) ?? "?"): advance the clock past it or cancel transaction \(latestId)"
            )
        }
        let currentLevel = app.products[subscription.plan.productId]?.serviceLevel ?? 1
        let kind: SimulatorPlanChange.Kind = level < currentLevel ? .upgrade : (level > currentLevel ? .downgrade : .crossgrade)
        let immediate = kind == .upgrade || (kind == .crossgrade && plan.duration == subscription.plan.duration)
        let change = SimulatorPlanChange(
            kind: kind, fromProductId: subscription.plan.productId, toProductId: plan.productId,
            effectiveDate: immediate ? now : (latest.expiresDate ?? now), isImmediate: immediate
        )
        guard immediate else {
            subscription.pendingPlan = plan
            subscriptions[subscription.originalTransactionId] = subscription
            return Purchase(transaction: latest, change: change, createdTransaction: false)
        }
        latest.isUpgraded = true
        latest.cancellationDate = now
        transactions[latestId] = latest
        subscription.switchPlan(to: plan, at: now)
        let transaction = record(periodTransaction(of: subscription, startingAt: now, introPrice: false))
        subscription.periodIds.append(transaction.transactionId)
        subscriptions[subscription.originalTransactionId] = subscription
        return Purchase(transaction: transaction, change: change, createdTransaction: true)
    }

    /// Makes the next period of `subscription`, starting at `start`, and records it.
    @discardableResult
    func renew(_ subscription: inout SimulatorSubscription, startingAt start: Date, restart: Bool) -> SimulatorTransaction {
        let next = subscription.advance(startingAt: start, restart: restart)
        let renewal = record(periodTransaction(of: subscription, startingAt: start, introPrice: next.introPrice))
        subscription.periodIds.append(renewal.transactionId)
        return renewal
    }

    /// The transaction of the subscription's latest period (already advanced to it), starting at `start`.
    func periodTransaction(of subscription: SimulatorSubscription, startingAt start: Date, introPrice: Bool) -> SimulatorTransaction {
        SimulatorTransaction(
            transactionId: takeTransactionId(), originalTransactionId: subscription.originalTransactionId,
            userId: subscription.userId, bundleId: subscription.bundleId, productId: subscription.plan.productId,
            productType: .autoRenewable, quantity: 1, purchaseDate: start, originalPurchaseDate: subscription.originalPurchaseDate,
            expiresDate: subscription.latestEnd(in: environment), webOrderLineItemId: takeWebOrderId(),
            subscriptionGroupIdentifier: subscription.groupIdentifier, isInIntroOfferPeriod: introPrice
        )
    }

    /// Active (its period runs and was not refunded) or in billing retry: the group's subscription of now.
    func isLive(_ subscription: SimulatorSubscription) -> Bool {
        guard let view = view(of: subscription, at: now) else { return false }
        return view.isActive || view.isInBillingRetry
    }

    /// A period that runs now and was not refunded nor cut short.
    static func isActive(_ latest: SimulatorTransaction, at now: Date) -> Bool {
        latest.cancellationDate == nil && (latest.expiresDate ?? .distantPast) > now
    }

    /// Makes every renewal due by now of the user's subscriptions in the app, and the family's copies.
    func materialize(_ key: UserApp) {
        let now = self.now
        for originalId in subscriptionsByUser[key] ?? [] {
            guard var subscription = subscriptions[originalId] else { continue }
            var changed = false
            while subscription.renews(in: environment), subscription.latestEnd(in: environment) <= now {
                renew(&subscription, startingAt: subscription.latestEnd(in: environment), restart: false)
                changed = true
            }
            if changed { subscriptions[originalId] = subscription }
        }
        if let organizer = families.organizer(of: key.userId) {
            shareFamilyPurchases(with: key, from: UserApp(userId: organizer, bundleId: key.bundleId))
        }
    }

    func subscriptionViews(_ key: UserApp) -> [SubscriptionView] {
        let now = self.now
        return (subscriptionsByUser[key] ?? []).compactMap { originalId in
            if let subscription = subscriptions[originalId] { return view(of: subscription, at: now) }
            return sharedSubscriptions[originalId].flatMap { view(of: $0, at: now) }
        }
    }

    func view(of subscription: SimulatorSubscription, at now: Date) -> SubscriptionView? {
        guard let latestId = subscription.latestId, let latest = transactions[latestId] else { return nil }
        let willRenew = subscription.willRenew(in: environment)
        let end = latest.expiresDate ?? .distantPast
        let isActive = Self.isActive(latest, at: now)
        let retrying = !isActive && latest.cancellationDate == nil && willRenew && subscription.billingIssue != nil
        return SubscriptionView(
            originalTransactionId: subscription.originalTransactionId,
            productId: latest.productId,
            autoRenewProductId: (subscription.pendingPlan ?? subscription.plan).productId,
            latest: latest,
            willRenew: willRenew,
            isActive: isActive,
            isInBillingRetry: retrying,
            gracePeriodExpiresDate: retrying ? subscription.billingIssue?.gracePeriodDays.map { end.addingTimeInterval(Double($0) * 86_400) } : nil
        )
    }

    /// A member's copy renews as the buyer's does while it mirrors the buyer's latest period; once the
    /// buyer's subscription moved to a product not shared, the copy ends with its last period.
    func view(of shared: SharedSubscription, at now: Date) -> SubscriptionView? {
        guard let latestId = shared.periodIds.last, let latest = transactions[latestId] else { return nil }
        let isActive = Self.isActive(latest, at: now)
        if let buyer = subscriptions[shared.buyerOriginalTransactionId], buyer.latestId == latest.sharedTransactionId,
           let buyerView = view(of: buyer, at: now) {
            return SubscriptionView(
                originalTransactionId: shared.originalTransactionId, productId: latest.productId,
                autoRenewProductId: buyerView.autoRenewProductId, latest: latest, willRenew: buyerView.willRenew,
                isActive: isActive, isInBillingRetry: buyerView.isInBillingRetry, gracePeriodExpiresDate: buyerView.gracePeriodExpiresDate
            )
        }
        return SubscriptionView(
            originalTransactionId: shared.originalTransactionId, productId: latest.productId, autoRenewProductId: latest.productId,
            latest: latest, willRenew: false, isActive: isActive, isInBillingRetry: false, gracePeriodExpiresDate: nil
        )
    }

    func status(_ originalTransactionId: String) throws -> SimulatorSubscriptionStatus {
        let now = self.now
        let own = subscriptions[originalTransactionId]
        let shared = sharedSubscriptions[originalTransactionId]
        guard let view = own.flatMap({ view(of: $0, at: now) }) ?? shared.flatMap({ view(of: $0, at: now) }) else {
            throw SimulatorError.notFound("no subscription '\(originalTransactionId)'")
        }
        let billing = own?.billingIssue ?? shared.flatMap { subscriptions[$0.buyerOriginalTransactionId]?.billingIssue }
        return SimulatorSubscriptionStatus(
            originalTransactionId: originalTransactionId, userId: view.latest.userId, bundleId: view.latest.bundleId,
            productId: view.productId, autoRenewProductId: view.autoRenewProductId, autoRenewStatus: view.willRenew,
            isActive: view.isActive, expiresDate: view.latest.expiresDate, billingFailing: billing != nil,
            gracePeriodDays: billing?.gracePeriodDays, isInBillingRetryPeriod: view.isInBillingRetry,
            gracePeriodExpiresDate: view.gracePeriodExpiresDate, latestTransaction: view.latest
        )
    }

    /// The user and app of a subscription; one a family member only shares cannot be changed through it.
    func requireSubscription(_ originalTransactionId: String, toChange: Bool) throws -> UserApp {
        if let subscription = subscriptions[originalTransactionId] {
            return UserApp(userId: subscription.userId, bundleId: subscription.bundleId)
        }
        guard let shared = sharedSubscriptions[originalTransactionId], let first = transactions[originalTransactionId] else {
            throw SimulatorError.notFound("no subscription with original transaction id '\(originalTransactionId)'")
        }
        guard !toChange else {
            throw SimulatorError.badRequest(
                "subscription \(originalTransactionId) is shared by a family member: change the buyer's subscription \(shared.buyerOriginalTransactionId)"
            )
        }
        return UserApp(userId: first.userId, bundleId: first.bundleId)
    }
}
