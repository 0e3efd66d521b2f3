import Foundation

/// Judges what the App Store's facts mean: pure, versioned, and the only place it is decided.
///
/// Nothing here is stored: the log keeps the facts, and every reader (decisions, projections,
/// `ledger query`) classifies them again. A rule fixed here, with `version` bumped and the
/// projections' versions with it, changes every past answer on the next rebuild.
///
/// Version 2 (the first over recorded facts):
/// - Auto-renewables: one payment per `web_order_line_item_id`, the earliest transaction of the
///   line item (purchase date, then Apple's ever-increasing transaction id); the others are
///   restores or re-identified periods and take no money. A payment whose transaction id is the
///   original is the purchase; later ones are renewals, or an upgrade (the chain's previous period
///   was ended by `is_upgraded`) or a crossgrade (another product of the group, at renewal).
/// - `is_upgraded` with a cancellation date ends the period then; it is not a refund.
/// - Other products: a transaction pointing at another original is a restore of it (its origin
///   unknown when the stream never saw that original: it still grants ownership, without money).
///   A non-consumable or free subscription bought again in the same environment while owned is a
///   restore of the ownership; bought in the other environment it is a purchase there.
/// - A cancellation date (not an upgrade) or a recorded revocation refunds the transaction; a
///   refund of a restore refunds the purchase it restores.
/// - Prices: Apple's signed price (StoreKit 2, notifications) when a signed view gave one; a free trial is zero; the device's reported price goes on the newest purchase or
///   upgrade first seen in its post; anything else takes the catalog's price in force when it was
///   recorded, in the user's currency; a device price that differs from the catalog's is kept, and
///   the catalog's is shown beside it. Sandbox and family-shared transactions are never revenue.
///
/// Version 3:
/// - Apple's signed `price` is the whole quantity's (a transaction's total, not a unit price): it
///   is the transaction's `amount`, and its unit price is its share; a device's or the catalog's
///   price is a unit price, times the quantity.
/// - A refund says how much it took back: all of it, a share (`REFUND_PRORATED` with
///   `revocationPercentage`, of the money and, for a consumable, of the units), or no money
///   (`FAMILY_REVOKE`).
/// - The user's currency for a catalog price is the one in force when the transaction happened
///   (`CurrencyTimeline`), never the latest post's.
public enum TransactionClassifier {
    public static var version: Int { Rules.current.version }

    /// A version of the rules. Every reader uses `current`; an older version is kept only where
    /// a replay has to show what a fix changed (`ledger demo`'s replay story, and its test).
    public struct Rules: Hashable, Sendable {
        public let version: Int
        /// Auto-renewables: one payment per `web_order_line_item_id`. Without it (version 1, the
        /// verdict the ledger took at ingest before it kept Apple's facts) every transaction of a
        /// chain that is not its original and is not a restore recorded as such is a paid
        /// renewal, so a restored or re-identified period is counted a second time.
        public let onePaymentPerWebOrder: Bool

        public static let current = Rules(version: 3, onePaymentPerWebOrder: true)
        /// The rule with the bug version 2 fixed, for replays that show the fix.
        public static let version1 = Rules(version: 1, onePaymentPerWebOrder: false)
    }

    public static func classify(_ facts: TransactionFacts, catalog: ProductCatalog, rules: Rules = .current) -> [UserLedger.Transaction] {
        let judged = judge(facts.order.compactMap { facts.observed[$0] }, facts: facts, catalog: catalog, rules: rules)
        return facts.order.compactMap { judged[$0] }
    }

    /// The transactions of `observations` (in the order they were recorded), judged by the rules
    /// with what the user's facts say of them: kinds and refunds, and with `pricing`, prices.
    ///
    /// Kinds and refunds read only transactions tied to the one judged (`TransactionTies`), so a
    /// set closed under those ties is judged exactly as within all of the user's transactions.
    /// Prices read besides the kinds of the other transactions of the post that brought the
    /// transaction, and the user's currency (`price(_:facts:catalog:into:)`).
    static func judge(
        _ observations: [TransactionFacts.Observed], facts: TransactionFacts, catalog: ProductCatalog, rules: Rules,
        pricing: Bool = true
    ) -> [String: UserLedger.Transaction] {
        var owners: [OwnerKey: String] = [:]
        return judge(observations, facts: facts, catalog: catalog, rules: rules, pricing: pricing, owners: &owners)
    }

    /// `judge`, giving besides the owner of each product owned for ever among `observations`.
    static func judge(
        _ observations: [TransactionFacts.Observed], facts: TransactionFacts, catalog: ProductCatalog, rules: Rules,
        pricing: Bool = true, owners: inout [OwnerKey: String]
    ) -> [String: UserLedger.Transaction] {
        var judged: [String: UserLedger.Transaction] = [:]
        judged.reserveCapacity(observations.count)
        for observation in observations {
            judged[observation.transactionId] = base(observation, catalog: catalog)
        }
        classifyAutoRenewables(observations, rules: rules, into: &judged)
        classifyOthers(observations, owners: &owners, into: &judged)
        applyRefunds(observations, facts: facts, into: &judged)
        if pricing { price(observations, facts: facts, catalog: catalog, into: &judged) }
        return judged
    }

    /// Judges `appended` (kinds and refunds, not prices) after the transactions `judged` already
    /// holds, as `judge` over all of them would, given the owners those judged transactions made.
    ///
    /// Holds when every transaction of `appended` was first recorded after those of `judged`, none
    /// is an auto-renewable (their payments are ordered by purchase date, not by when they were
    /// recorded), none was named (as an original, say) before it was recorded, and none was
    /// revoked before it was recorded: then none of them changes how an earlier one was judged,
    /// except that a refund of a restore refunds what it restores, and their refunds come after
    /// every earlier one.
    static func judge(
        appended observations: [TransactionFacts.Observed], catalog: ProductCatalog, facts: TransactionFacts,
        owners: inout [OwnerKey: String], into judged: inout [String: UserLedger.Transaction]
    ) {
        for observation in observations {
            judged[observation.transactionId] = base(observation, catalog: catalog)
        }
        classifyOthers(observations, owners: &owners, into: &judged)
        applyRefunds(observations, facts: facts, into: &judged)
    }

    /// A product owned for ever, in one environment: the first live purchase owns it.
    struct OwnerKey: Hashable, Sendable {
        let environment: StoreEnvironment
        let productId: String
    }

    /// The product type a transaction is judged as: the catalog's when the fact was recorded (or
    /// its first definition), else what a version-1 event said, else the type Apple signed, else
    /// auto-renewable when it expires.
    static func productType(of observation: TransactionFacts.Observed, catalog: ProductCatalog) -> ProductType {
        catalog.product(observation.fields.productId ?? "", asOf: observation.first.position)?.type
            ?? observation.legacy?.productType.flatMap { $0 == .unknown ? nil : $0 }
            ?? observation.appStoreProductType
            ?? (observation.fields.expiresDate != nil ? .autoRenewable : .unknown)
    }

    // MARK: Steps

    private static func base(_ observation: TransactionFacts.Observed, catalog: ProductCatalog) -> UserLedger.Transaction {
        let fields = observation.fields
        let productId = fields.productId ?? ""
        let expires = fields.expiresDate
        let type = productType(of: observation, catalog: catalog)
        let offer: UserLedger.Transaction.Offer = fields.isTrialPeriod ? .freeTrial : fields.isInIntroOfferPeriod ? .introOffer : .none
        var transaction = UserLedger.Transaction(
            transactionId: observation.transactionId,
            originalTransactionId: fields.originalTransactionId ?? observation.transactionId,
            productId: productId, productType: type, kind: .purchase,
            quantity: type == .consumable || type == .unknown ? fields.quantity : 1,
            purchaseDate: fields.purchaseDate ?? observation.first.recordedAt ?? Date(timeIntervalSince1970: 0),
            expiresDate: expires, environment: observation.environment, revokedAt: nil, revocationReason: nil,
            deviceId: observation.deviceId, price: nil, currency: nil, position: observation.first.position,
            recordedAt: observation.first.recordedAt, revokedPosition: nil, revocationRecordedAt: nil,
            expiryReportedAt: observation.expiryReportedAt, upgradedAt: nil, webOrderLineItemId: fields.webOrderLineItemId,
            offer: offer, isFamilyShared: fields.isFamilyShared, restores: nil, originalPurchaseDate: fields.originalPurchaseDate,
            storefront: fields.storefront ?? observation.appStoreStorefront?.code, storefrontId: fields.storefrontId ?? observation.appStoreStorefront?.id
        )
        if fields.isUpgraded, let cancelled = fields.cancellationDate { transaction.upgradedAt = cancelled }
        return transaction
    }

    /// Apple's transaction ids grow over time: compared as numbers when they are numbers.
    static func earlier(_ a: UserLedger.Transaction, _ b: UserLedger.Transaction) -> Bool {
        if a.purchaseDate.milliseconds != b.purchaseDate.milliseconds { return a.purchaseDate.milliseconds < b.purchaseDate.milliseconds }
        if a.transactionId.count != b.transactionId.count { return a.transactionId.count < b.transactionId.count }
        return a.transactionId < b.transactionId
    }

    private static func classifyAutoRenewables(
        _ observations: [TransactionFacts.Observed], rules: Rules, into judged: inout [String: UserLedger.Transaction]
    ) {
        let subscriptions = observations.compactMap { judged[$0.transactionId] }.filter { $0.productType == .autoRenewable }
        // One payment per line item; the rest restore it.
        var payments: [String: UserLedger.Transaction] = [:]
        for transaction in subscriptions.sorted(by: earlier) {
            if rules.onePaymentPerWebOrder, let lineItem = transaction.webOrderLineItemId {
                if let payment = payments[lineItem] {
                    judged[transaction.transactionId]?.kind = .restore
                    judged[transaction.transactionId]?.restores = payment.transactionId
                    continue
                }
                payments[lineItem] = transaction
            } else if let legacy = observations.first(where: { $0.transactionId == transaction.transactionId })?.legacy,
                      legacy.verdict == .restore {
                let restored = legacy.pointsAt.flatMap { judged[$0] != nil ? $0 : nil }
                judged[transaction.transactionId]?.kind = .restore
                judged[transaction.transactionId]?.restores = restored
                continue
            }
        }
        // Each chain's payments in time order: purchase, then renewals, upgrades, crossgrades.
        let chains = Dictionary(grouping: subscriptions.compactMap { judged[$0.transactionId] }.filter { $0.kind.isPayment },
                                by: \.originalTransactionId)
        for (_, chain) in chains {
            var previous: UserLedger.Transaction?
            for transaction in chain.sorted(by: earlier) {
                // Not the original and first in the stream: the chain began before the ledger saw it.
                let kind: UserLedger.Transaction.Kind
                if transaction.transactionId == transaction.originalTransactionId {
                    kind = .purchase
                } else if let previous, previous.productId != transaction.productId {
                    kind = previous.upgradedAt != nil ? .upgrade : .crossgrade
                } else {
                    kind = .renewal
                }
                judged[transaction.transactionId]?.kind = kind
                previous = transaction
            }
        }
    }

    /// Kinds of everything but auto-renewables; `owners` holds the owner (its transaction id) of
    /// each product owned for ever, from transactions judged before these, and gains theirs.
    private static func classifyOthers(
        _ observations: [TransactionFacts.Observed], owners: inout [OwnerKey: String], into judged: inout [String: UserLedger.Transaction]
    ) {
        for observation in observations {
            guard var transaction = judged[observation.transactionId], transaction.productType != .autoRenewable else { continue }
            let ownerKey = OwnerKey(environment: transaction.environment, productId: transaction.productId)
            if let legacy = observation.legacy, legacy.verdict == .restore {
                transaction.kind = .restore
                transaction.restores = legacy.pointsAt.flatMap { judged[$0] != nil ? $0 : nil }
            } else if transaction.transactionId != transaction.originalTransactionId, transaction.productType != .consumable {
                transaction.kind = .restore
                transaction.restores = judged[transaction.originalTransactionId] != nil ? transaction.originalTransactionId : nil
            } else if transaction.productType.isOwnedForever, let owner = owners[ownerKey], owner != transaction.transactionId {
                transaction.kind = .restore
                transaction.restores = owner
            } else {
                transaction.kind = .purchase
            }
            let cancelled = observation.fields.cancellationDate != nil || observation.fields.isUpgraded
            if transaction.productType.isOwnedForever, transaction.grantsOwnership, owners[ownerKey] == nil, !cancelled {
                owners[ownerKey] = transaction.transactionId
            }
            judged[observation.transactionId] = transaction
        }
    }

    private static func applyRefunds(
        _ observations: [TransactionFacts.Observed], facts: TransactionFacts, into judged: inout [String: UserLedger.Transaction]
    ) {
        typealias Refund = UserLedger.Transaction.Refund
        func refund(_ id: String, at date: Date, reason: String, how: Refund, seen: TransactionFacts.Recorded) {
            guard var transaction = judged[id], !transaction.isRevoked else { return }
            transaction.revokedAt = date
            transaction.revocationReason = reason
            transaction.revokedPosition = seen.position
            transaction.revocationRecordedAt = seen.recordedAt
            transaction.refund = how
            judged[id] = transaction
        }
        var refunds: [(id: String, date: Date, reason: String, how: Refund, seen: TransactionFacts.Recorded)] = []
        for observation in observations {
            let fields = observation.fields
            if let cancelled = fields.cancellationDate, !fields.isUpgraded, let seen = observation.cancellationSeen {
                let how = Refund(observation.appStoreRevocation)
                let reason = switch (how.kind, fields.cancellationReason) {
                case (.familyRevoke, _): "revoked from Family Sharing by the App Store (FAMILY_REVOKE)"
                case (.prorated, _): "refunded in part by the App Store (REFUND_PRORATED, \(Self.percent(how.share ?? 0)))"
                case (.full, 1): "refunded by the App Store (cancellation_reason 1: a problem with the app)"
                case (.full, _): "refunded by the App Store (cancellation_date)"
                }
                refunds.append((observation.transactionId, cancelled, reason, how, seen))
            }
        }
        for observation in observations {
            guard let revocation = facts.revocations[observation.transactionId] else { continue }
            refunds.append((observation.transactionId, revocation.revokedAt, revocation.reason, .full, revocation.at))
        }
        refunds.sort { ($0.seen.position, $0.id) < ($1.seen.position, $1.id) }
        for entry in refunds {
            refund(entry.id, at: entry.date, reason: entry.reason, how: entry.how, seen: entry.seen)
            if let restored = judged[entry.id]?.restores {
                refund(restored, at: entry.date, reason: "\(entry.reason), on its restore \(entry.id)", how: entry.how, seen: entry.seen)
            }
        }
    }

    /// Prices the transactions of `observations`, judged but not priced in `judged`, which must
    /// also hold (judged, priced or not) every other transaction first seen in their posts.
    static func price(
        _ observations: [TransactionFacts.Observed], facts: TransactionFacts, catalog: ProductCatalog,
        into judged: inout [String: UserLedger.Transaction]
    ) {
        // The device's report goes on the newest purchase or upgrade first seen in its post.
        var devicePrices: [String: (price: String, currency: String)] = [:]
        for index in Set(observations.compactMap(\.post)).sorted() {
            let post = facts.posts[index]
            guard let price = post.price, let currency = post.currency else { continue }
            let candidates = post.firstObserved.compactMap { judged[$0] }.filter {
                ($0.kind == .purchase || $0.kind == .upgrade) && !$0.isFamilyShared
            }
            if let newest = candidates.max(by: earlier) { devicePrices[newest.transactionId] = (price, currency) }
        }
        for observation in observations {
            if let legacy = observation.legacy, let price = legacy.price, let currency = legacy.currency {
                devicePrices[observation.transactionId] = (price, currency)
            }
        }
        for observation in observations {
            guard var transaction = judged[observation.transactionId], transaction.kind.isPayment, !transaction.isFamilyShared else { continue }
            let product = catalog.product(transaction.productId, asOf: observation.first.position)
            // The user's currency when it happened, never a later post's (a user who moves
            // country keeps last year's payments in last year's currency).
            let userCurrency = facts.currencies.currency(at: transaction.purchaseDate)
            if let paid = observation.appStorePrice {
                // Apple's own figure for this transaction beats any report or list price. It is the
                // whole quantity's: the unit price is its share.
                transaction.amount = paid.amount
                transaction.price = Money.unitPrice(of: paid.amount, quantity: transaction.quantity)
                transaction.currency = paid.currency
                transaction.priceSource = .appStore
                if let listed = product?.prices[paid.currency], let unit = transaction.price, !Self.sameAmount(listed, unit), transaction.offer == .none {
                    transaction.catalogPrice = listed
                }
            } else if transaction.offer == .freeTrial {
                transaction.price = "0"
                transaction.currency = devicePrices[transaction.transactionId]?.currency ?? userCurrency ?? product?.prices.keys.sorted().first
                transaction.priceSource = .trial
            } else if let reported = devicePrices[transaction.transactionId] {
                transaction.price = reported.price
                transaction.currency = reported.currency
                transaction.priceSource = .device
                if let listed = product?.prices[reported.currency], !Self.sameAmount(listed, reported.price), transaction.offer == .none {
                    transaction.catalogPrice = listed
                }
            } else if transaction.offer == .none, let product,
                      let currency = userCurrency.flatMap({ product.prices[$0] != nil ? $0 : nil })
                        ?? (product.prices.count == 1 ? product.prices.keys.first : nil) {
                transaction.price = product.prices[currency]
                transaction.currency = currency
                transaction.priceSource = .catalog
            }
            if transaction.priceSource != .appStore { transaction.amount = transaction.price.flatMap { Money.times($0, transaction.quantity) } }
            judged[observation.transactionId] = transaction
        }
    }

    /// Milliunits of a percent as people write a percentage: 40000 is "40%", 33333 is "33.333%".
    static func percent(_ milliPercent: Int) -> String {
        (Money.unitPrice(of: String(milliPercent), quantity: 1_000) ?? "?") + "%"
    }

    /// Decimal texts compared as amounts: "4.9" and "4.90" are the same price.
    static func sameAmount(_ a: String, _ b: String) -> Bool {
        Decimal(string: a) == Decimal(string: b)
    }
}
