import Foundation

/// What a user's stream recorded of App Store transactions, gathered and not yet judged.
///
/// Events written before facts were recorded (the version-1 verdicts `PurchaseRecorded`,
/// `SubscriptionRenewed`, `PurchaseRestored`) are read here as observations of the fields they
/// kept (the upcaster), with what they said noted as `legacy`: the classifier decides again.
public struct TransactionFacts: Hashable, Sendable {
    /// Where a fact was recorded.
    public struct Recorded: Hashable, Sendable {
        public let position: Int64
        public let recordedAt: Date?
    }

    /// What a version-1 verdict event said, for what the fields alone cannot tell.
    public struct Legacy: Hashable, Sendable {
        public enum Verdict: String, Hashable, Sendable { case purchase, renewal, restore }
        public let verdict: Verdict
        /// Restores: the original transaction the ledger pointed the restore at.
        public let pointsAt: String?
        public let productType: ProductType?
        /// What the device reported, which version 1 put on this transaction itself.
        public let price: String?
        public let currency: String?
    }

    /// Every observation of one transaction, reduced to the first and the latest.
    public struct Observed: Hashable, Sendable {
        public let transactionId: String
        public let environment: StoreEnvironment
        /// The latest fields the App Store sent.
        public internal(set) var fields: AppStoreFields
        public let first: Recorded
        /// Where the fields held now were recorded (a later observation that said something new).
        public internal(set) var latest: Recorded
        /// The device whose post first brought it.
        public let deviceId: String?
        /// Where a `cancellation_date` was first seen for it.
        public internal(set) var cancellationSeen: Recorded?
        public internal(set) var expiryReportedAt: Date?
        public internal(set) var legacy: Legacy?
        /// The post that first brought it (an index into `posts`), if a `ReceiptPosted` did.
        public let post: Int?
        /// What Apple said the customer paid and the product's type, from a signed view of the
        /// transaction (StoreKit 2, a notification), kept when a receipt's view replaces `fields`.
        public internal(set) var appStorePrice: AppStorePrice?
        public internal(set) var appStoreProductType: ProductType?
        /// The buyer's storefront a signed view named (alpha-3 code, Apple's id).
        public internal(set) var appStoreStorefront: Storefront?

        /// How the latest signed view said the transaction was taken back (Apple's
        /// `revocationType` and `revocationPercentage`); nil when it said nothing of it (never
        /// revoked, or a refund reversed). A receipt's view, which names neither, keeps it.
        public internal(set) var appStoreRevocation: SignedRevocation?
        /// When the latest signed view of it was signed.
        public internal(set) var latestSignedDate: Date?

        public struct Storefront: Hashable, Sendable {
            public let code: String
            public let id: String?
        }

        public struct SignedRevocation: Hashable, Sendable {
            public let type: String
            public let percentage: Int?
        }

        /// A signed view signed before the one held says nothing newer: it is recorded, and the
        /// fields stay those of the later signature (a notification applied late, say).
        /// Held against the latest signature seen, not the fields held now: a receipt's view in
        /// between does not let an older signed view undo what a later one said.
        func isOlder(_ fields: AppStoreFields) -> Bool {
            guard fields.isSigned, let new = fields.signedDate, let held = latestSignedDate else { return false }
            return new < held
        }

        /// `older`: the view was signed before the one held, so what it says of a revocation is stale.
        mutating func keepSigned(_ fields: AppStoreFields, older: Bool = false) {
            if let price = fields.price { appStorePrice = price }
            if let type = fields.appStoreProductType { appStoreProductType = type }
            if let code = fields.storefront { appStoreStorefront = Storefront(code: code, id: fields.storefrontId) }
            if fields.isSigned, !older, let date = fields.signedDate { latestSignedDate = date }
            if fields.isSigned, !older { appStoreRevocation = fields.revocationType.map { SignedRevocation(type: $0, percentage: fields.revocationPercentage) } }
        }
    }

    /// A receipt post that brought new observations.
    public struct Post: Hashable, Sendable {
        public let deviceId: String
        public let price: String?
        public let currency: String?
        public let at: Recorded
        /// The transactions first observed in this post.
        public internal(set) var firstObserved: [String] = []
    }

    /// An App Store notification about one of the user's transactions.
    public struct Notification: Hashable, Sendable {
        public let uuid: String
        public let type: String
        public let subtype: String?
        public let signedDate: Date
        public let transactionId: String?
        public let originalTransactionId: String?
        /// CONSUMPTION_REQUEST: why the customer asked for a refund (`data.consumptionRequestReason`).
        public let consumptionRequestReason: String?
        public let at: Recorded
    }

    /// A revocation recorded as such (by support, or a version-1 refund verdict).
    public struct Revocation: Hashable, Sendable {
        public let revokedAt: Date
        public let reason: String
        public let at: Recorded
    }

    public private(set) var observed: [String: Observed] = [:]
    /// Transaction ids in the order they were first recorded.
    public private(set) var order: [String] = []
    /// Where each product's transactions are in `order`, ascending: a question about one product
    /// looks at that product's transactions, not at the whole history.
    public private(set) var orderOfProduct: [String: [Int]] = [:]
    public private(set) var posts: [Post] = []
    /// The App Store notifications recorded on the stream, in log order.
    public private(set) var notifications: [Notification] = []
    public private(set) var revocations: [String: Revocation] = [:]
    /// The latest `pending_renewal_info` fields of each original transaction.
    public private(set) var renewalInfo: [String: AppStoreFields] = [:]
    /// The post whose observations are being folded: a post's observations follow it in one append.
    private var openPost: Int?
    /// Every transaction id whose facts changed (observed, observed again, revoked, reported
    /// expired), in the order of the changes: what a judgement kept from before has to look at again.
    public private(set) var changes: [String] = []
    /// The user's currency over time, as the posts (a device's price) and Apple's signed prices
    /// said it: the currency the catalog prices a transaction in is the one in force when it happened.
    public private(set) var currencies = CurrencyTimeline()

    public init() {}

    mutating func post(_ event: ReceiptPosted, at: Recorded) {
        posts.append(Post(deviceId: event.deviceId, price: event.price, currency: event.currency, at: at))
        openPost = posts.indices.last
        if let currency = event.currency { currencies.add(currency, at: event.answeredAt) }
    }

    /// Any other event ends the open post.
    mutating func closePost() {
        openPost = nil
    }

    mutating func observe(_ event: AppStoreTransactionObserved, at: Recorded) {
        let fields = AppStoreFields(event.fields)
        if var known = observed[event.transactionId] {
            let older = known.isOlder(fields)
            known.keepSigned(fields, older: older)
            if older {
                observed[event.transactionId] = known
                changes.append(event.transactionId)
                return
            }
            if known.fields.productId != fields.productId {
                moveInOrderOfProduct(event.transactionId, from: known.fields.productId ?? "", to: fields.productId ?? "")
            }
            known.fields = fields
            known.latest = at
            if let paid = fields.price, let date = fields.purchaseDate { currencies.add(paid.currency, at: date) }
            if known.cancellationSeen == nil, fields.cancellationDate != nil { known.cancellationSeen = at }
            if event.status == 21006 { known.reportExpiry(at: event.answeredAt) }
            observed[event.transactionId] = known
            changes.append(event.transactionId)
            return
        }
        let post = openPost
        post.map { posts[$0].firstObserved.append(event.transactionId) }
        var new = Observed(transactionId: event.transactionId, environment: event.environment, fields: fields, first: at, latest: at,
                           deviceId: event.deviceId.isEmpty ? nil : event.deviceId, cancellationSeen: fields.cancellationDate != nil ? at : nil, post: post)
        if let paid = fields.price, let date = fields.purchaseDate { currencies.add(paid.currency, at: date) }
        if event.status == 21006 { new.reportExpiry(at: event.answeredAt) }
        new.keepSigned(fields)
        record(new)
    }

    mutating func notify(_ event: AppStoreNotificationReceived, at: Recorded) {
        notifications.append(Notification(
            uuid: event.notificationUUID, type: event.notificationType, subtype: event.subtype, signedDate: event.signedDate,
            transactionId: event.transaction.flatMap { AppStoreFields($0).transactionId }, originalTransactionId: event.originalTransactionId,
            consumptionRequestReason: event.fields["data.consumptionRequestReason"], at: at
        ))
    }

    mutating func observe(_ event: RenewalInfoObserved, at: Recorded) {
        renewalInfo[event.originalTransactionId] = AppStoreFields(event.fields)
    }

    mutating func upcast(_ event: PurchaseRecorded, at: Recorded) {
        var fields = Self.fields(event.transactionId, event.originalTransactionId, event.productId, event.purchaseDate, event.expiresDate)
        fields["quantity"] = String(event.quantity)
        record(Observed(
            transactionId: event.transactionId, environment: event.environment, fields: AppStoreFields(fields), first: at, latest: at,
            deviceId: event.deviceId, legacy: Legacy(verdict: .purchase, pointsAt: nil, productType: event.productType,
                                                     price: event.price, currency: event.currency), post: nil
        ))
    }

    mutating func upcast(_ event: SubscriptionRenewed, at: Recorded) {
        let fields = Self.fields(event.transactionId, event.originalTransactionId, event.productId, event.purchaseDate, event.expiresDate)
        record(Observed(
            transactionId: event.transactionId, environment: event.environment, fields: AppStoreFields(fields), first: at, latest: at,
            deviceId: nil, legacy: Legacy(verdict: .renewal, pointsAt: nil, productType: .autoRenewable,
                                          price: event.price, currency: event.currency), post: nil
        ))
    }

    mutating func upcast(_ event: PurchaseRestored, at: Recorded) {
        // Version 1 kept the original it pointed the restore at, not Apple's original_transaction_id.
        let fields = Self.fields(event.transactionId, event.originalTransactionId, event.productId, event.purchaseDate, nil)
        record(Observed(
            transactionId: event.transactionId, environment: event.environment, fields: AppStoreFields(fields), first: at, latest: at,
            deviceId: event.deviceId, legacy: Legacy(verdict: .restore, pointsAt: event.originalTransactionId, productType: nil,
                                                     price: nil, currency: nil), post: nil
        ))
    }

    mutating func revoke(_ event: PurchaseRevoked, at: Recorded) {
        guard revocations[event.transactionId] == nil else { return }
        revocations[event.transactionId] = Revocation(revokedAt: event.revokedAt, reason: event.reason, at: at)
        changes.append(event.transactionId)
    }

    mutating func reportExpiry(_ event: SubscriptionExpiryReported) {
        observed[event.transactionId]?.reportExpiry(at: event.reportedAt)
        changes.append(event.transactionId)
    }

    /// A transaction observed again under another product id (the latest answer's fields count).
    private mutating func moveInOrderOfProduct(_ transactionId: String, from old: String, to new: String) {
        guard let places = orderOfProduct[old], let index = places.firstIndex(where: { order[$0] == transactionId }) else { return }
        let offset = places[index]
        orderOfProduct[old]?.remove(at: index)
        if orderOfProduct[old]?.isEmpty == true { orderOfProduct[old] = nil }
        var moved = orderOfProduct[new] ?? []
        moved.insert(offset, at: moved.firstIndex { $0 > offset } ?? moved.endIndex)
        orderOfProduct[new] = moved
    }

    private mutating func record(_ observation: Observed) {
        guard observed[observation.transactionId] == nil else { return }
        observed[observation.transactionId] = observation
        orderOfProduct[observation.fields.productId ?? "", default: []].append(order.count)
        order.append(observation.transactionId)
        changes.append(observation.transactionId)
        if let currency = observation.legacy?.currency { currencies.add(currency, at: observation.fields.purchaseDate ?? .distantPast) }
    }

    private static func fields(_ id: String, _ original: String, _ product: String, _ purchased: Date, _ expires: Date?) -> [String: String] {
        var fields = ["transaction_id": id, "original_transaction_id": original, "product_id": product,
                      "purchase_date_ms": String(purchased.milliseconds)]
        if let expires { fields["expires_date_ms"] = String(expires.milliseconds) }
        return fields
    }
}

extension TransactionFacts.Observed {
    /// The first 21006 answer counts: later ones say the same of a period already over.
    mutating func reportExpiry(at instant: Date) {
        if let earlier = expiryReportedAt, earlier <= instant { return }
        expiryReportedAt = instant
    }
}
