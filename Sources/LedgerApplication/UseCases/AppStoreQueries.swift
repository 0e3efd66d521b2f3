import Foundation
import LedgerDomain
import Logging

/// What support and operators ask Apple through the App Store Server API, beside what the ledger
/// holds: an order from a customer's e-mail receipt, a user's subscriptions as Apple has them now,
/// whether Apple's notifications reach the ledger. Each call runs on the caller's request (the
/// CLI, a read route), never on a device's post, under the client's own deadline; each refusal
/// says what to do.
public struct AppStoreQueries: Sendable {
    let server: (any AppStoreServer)?
    let backfill: BackfillHistory?
    let directory: any AppDirectory
    let inbox: any NotificationInbox
    let reader: UserStreamReader
    let store: any EventStore
    let logger: Logger

    public init(
        server: (any AppStoreServer)?, backfill: BackfillHistory?, directory: any AppDirectory, inbox: any NotificationInbox,
        reader: UserStreamReader, store: any EventStore, logger: Logger
    ) {
        self.server = server
        self.backfill = backfill
        self.directory = directory
        self.inbox = inbox
        self.reader = reader
        self.store = store
        self.logger = logger
    }

    // MARK: Orders

    /// An order as Apple has it, each transaction with the user the ledger holds it for.
    public struct Order: Encodable, Sendable {
        public let orderId: String
        public let transactions: [Item]

        public struct Item: Encodable, Sendable {
            public let transactionId: String
            @NullWhenAbsent public var originalTransactionId: String?
            @NullWhenAbsent public var productId: String?
            @NullWhenAbsent public var productType: String?
            @NullWhenAbsent public var purchaseDate: Date?
            public let quantity: Int
            /// Apple's price of the whole quantity, and its currency.
            @NullWhenAbsent public var price: String?
            @NullWhenAbsent public var currency: String?
            @NullWhenAbsent public var storefront: String?
            @NullWhenAbsent public var revocationDate: Date?
            /// The user whose stream holds the transaction (or its original); null when the
            /// ledger holds it for nobody.
            @NullWhenAbsent public var userId: String?
        }
    }

    /// Looks `orderId` up with Apple (production, as Apple's lookup is).
    public func order(app: String, orderId: String) async throws -> Order {
        guard !orderId.isEmpty, orderId.count <= 64, orderId.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber) }) else {
            throw AppStoreQueryError(.invalidInput, "an order id is the letters and digits of the Order ID on the customer's e-mail receipt from Apple (got '\(orderId.prefix(80))')")
        }
        let (server, key) = try await connection(app, for: "look orders up")
        let found: [HistoryTransaction]?
        do {
            found = try await server.lookUpOrder(app: app, key: key, orderId: orderId)
        } catch {
            throw Self.refusal(error, asking: "Apple's order lookup")
        }
        guard let found else {
            throw AppStoreQueryError(.orderNotFound, "Apple knows no order \(orderId) with a purchase of \(app): check the Order ID on the customer's e-mail receipt (production purchases only; the sandbox has no orders)")
        }
        var items: [Order.Item] = []
        for transaction in found {
            let fields = AppStoreFields(transaction.fields)
            guard let id = fields.transactionId else { continue }
            let ids = [id] + (fields.originalTransactionId.map { [$0] } ?? [])
            let holder = try await inbox.holder(of: ids, app: app, environment: .production)
            items.append(Order.Item(
                transactionId: id, originalTransactionId: fields.originalTransactionId, productId: fields.productId,
                productType: fields.appStoreProductType?.rawValue, purchaseDate: fields.purchaseDate, quantity: fields.quantity,
                price: fields.price?.amount, currency: fields.price?.currency, storefront: fields.storefront,
                revocationDate: fields.cancellationDate, userId: holder
            ))
        }
        return Order(orderId: orderId, transactions: items)
    }

    // MARK: Subscription statuses

    /// A user's subscriptions as Apple has them, beside the ledger's view of each.
    public struct Statuses: Sendable {
        public let user: String
        public var subscriptions: [Subscription] = []
        /// Facts Apple's answer brought that the stream lacked, now recorded.
        public var recorded = 0
        /// Transactions of the answer another user holds, left to them.
        public var heldByOthers: [String] = []
    }

    public struct Subscription: Sendable, Hashable {
        public let environment: StoreEnvironment
        public let group: String
        public let originalTransactionId: String
        public let apple: View
        public let ledger: View?

        /// One side's view of a subscription.
        public struct View: Sendable, Hashable {
            /// `active`, `expired`, `billing retry`, `billing grace period`, `revoked`.
            public let state: String
            public let productId: String?
            public let expiresDate: Date?
            /// Whether it renews at the end of the period; nil when not known.
            public let autoRenew: Bool?
        }

        /// Whether the ledger says what Apple says (state and product).
        public var agrees: Bool { ledger?.state == apple.state && ledger?.productId == apple.productId }
    }

    /// Asks Apple (Get All Subscription Statuses) about the user's auto-renewable subscriptions,
    /// records what is news (the latest signed transactions and renewal info), and answers both
    /// views per subscription. One call per Apple account the user's purchases were made with.
    public func subscriptionStatuses(app: String, user: String, now: Date = Date()) async throws -> Statuses {
        let before = try await reader.state(app: app, user: user)
        guard before.version > 0 else { throw ReadError.unknownUser(user) }
        let (server, key) = try await connection(app, for: "ask Apple about subscriptions")
        guard let backfill else { throw AppStoreQueryError(.notConfigured, "this ledger has no App Store Server API client") }
        var result = Statuses(user: user)
        var found: [(StoreEnvironment, SubscriptionStatus)] = []
        for environment in StoreEnvironment.allCases {
            // Apple answers every subscription of the account that made the transaction asked about.
            var ask = Self.originals(of: before, in: environment)
            while let transactionId = ask.first {
                let statuses: [SubscriptionStatus]
                do {
                    statuses = try await server.subscriptionStatuses(app: app, environment: environment, key: key, transactionId: transactionId)
                } catch {
                    throw Self.refusal(error, asking: "Apple's subscription statuses")
                }
                ask.removeAll { id in id == transactionId || statuses.contains { $0.originalTransactionId == id } }
                let fresh = statuses.filter { status in !found.contains { $0.0 == environment && $0.1.originalTransactionId == status.originalTransactionId } }
                found += fresh.map { (environment, $0) }
                let transactions = fresh.compactMap(\.transaction)
                guard !transactions.isEmpty else { continue }
                let recording = try await backfill.recordFetched(
                    transactions, renewalInfo: fresh.compactMap(\.renewalInfo), askedAbout: "subscription statuses of \(transactionId)", app: app,
                    user: user, environment: environment, metadata: ["source": "subscription statuses"]
                )
                result.recorded += recording.recorded.count
                result.heldByOthers += recording.notRecorded
            }
        }
        let after = result.recorded > 0 ? try await reader.state(app: app, user: user) : before
        result.subscriptions = found.map { environment, status in
            let fields = status.transaction.map { AppStoreFields($0.fields) }
            let renewal = status.renewalInfo.map(AppStoreFields.init)
            return Subscription(
                environment: environment, group: status.group, originalTransactionId: status.originalTransactionId,
                apple: .init(state: status.statusName, productId: fields?.productId, expiresDate: fields?.expiresDate,
                             autoRenew: renewal.flatMap { Self.flag($0.values["autoRenewStatus"]) }),
                ledger: Self.view(of: status.originalTransactionId, in: after, now: now)
            )
        }.sorted { ($0.environment.rawValue, $0.group, $0.originalTransactionId) < ($1.environment.rawValue, $1.group, $1.originalTransactionId) }
        return result
    }

    /// The user's auto-renewable original transactions in `environment`, in the order they came;
    /// any transaction of the environment when there is none (Apple answers for the account).
    static func originals(of state: UserLedger, in environment: StoreEnvironment) -> [String] {
        let inEnvironment = state.transactionsInOrder.filter { $0.environment == environment && !$0.isFamilyShared }
        var seen: Set<String> = []
        let renewing = inEnvironment.filter { $0.productType == .autoRenewable }.map(\.originalTransactionId).filter { seen.insert($0).inserted }
        return renewing.isEmpty ? Array(inEnvironment.prefix(1).map(\.originalTransactionId)) : renewing
    }

    /// What the ledger says of one subscription: its latest period, as of `now`.
    static func view(of original: String, in state: UserLedger, now: Date) -> Subscription.View? {
        let periods = state.transactionsInOrder.filter { $0.originalTransactionId == original && $0.productType == .autoRenewable }
        guard let latest = periods.max(by: { ($0.expiresDate ?? .distantPast) < ($1.expiresDate ?? .distantPast) }) else { return nil }
        let renewal = state.facts.renewalInfo[original]
        let billingRetry = renewal?.isInBillingRetry == true
        let grace = renewal?.gracePeriodExpiresDate.map { $0 > now } == true
        let stateName: String
        if latest.isRevoked {
            stateName = "revoked"
        } else if let end = latest.periodEnd, end > now {
            stateName = "active"
        } else if grace {
            stateName = "billing grace period"
        } else if billingRetry {
            stateName = "billing retry"
        } else {
            stateName = "expired"
        }
        let autoRenew = renewal.flatMap { flag($0.values["autoRenewStatus"] ?? $0.values["auto_renew_status"]) }
        return .init(state: stateName, productId: latest.productId, expiresDate: latest.periodEnd, autoRenew: autoRenew)
    }

    private static func flag(_ text: String?) -> Bool? {
        switch text {
        case "1", "true": true
        case "0", "false": false
        default: nil
        }
    }

    // MARK: Test notifications

    /// What became of a TEST notification the ledger asked Apple for.
    public struct TestNotification: Sendable {
        public let environment: StoreEnvironment
        public let token: String
        /// Known once Apple tried to send it.
        public var notificationUUID: String?
        public var attempts: [TestNotificationStatus.Attempt] = []
        /// Where the ledger recorded it, when it did.
        public var recorded: AppendResult.EventReference?

        /// In words, with what to do.
        public var verdict: String {
            if let recorded {
                return "Apple sent the TEST notification and this ledger recorded it (position \(recorded.position)): notifications reach it"
            }
            guard let last = attempts.last else {
                return "Apple had not tried to send the TEST notification yet; ask again with `ledger appstore test-notification` in a minute"
            }
            if last.result == "SUCCESS" {
                return "Apple delivered the TEST notification, but not to this ledger: the notification URL in App Store Connect points elsewhere (it should end in /v1/apps/{bundleId}/notifications of this server)"
            }
            return "Apple could not deliver the TEST notification (\(last.result)): check the notification URL in App Store Connect, that it is reachable from the internet over HTTPS, and the ledger's log for refusals"
        }
    }

    /// Asks Apple to send a TEST notification, then waits up to `wait` for Apple's first try and
    /// looks for the notification in the log.
    public func testNotification(app: String, environment: StoreEnvironment, wait: Duration = .seconds(30),
                                 poll: Duration = .seconds(1)) async throws -> TestNotification {
        let (server, key) = try await connection(app, for: "ask for a test notification")
        let token: String
        do {
            token = try await server.requestTestNotification(app: app, environment: environment, key: key)
        } catch {
            throw Self.refusal(error, asking: "Apple's test notification")
        }
        var result = TestNotification(environment: environment, token: token)
        let clock = ContinuousClock()
        let deadline = clock.now + wait
        while true {
            let status: TestNotificationStatus?
            do {
                status = try await server.testNotificationStatus(app: app, environment: environment, key: key, token: token)
            } catch TransactionHistoryError.rateLimited {
                status = nil
            } catch {
                throw Self.refusal(error, asking: "Apple's test notification status")
            }
            if let status {
                result.notificationUUID = status.notificationUUID
                result.attempts = status.attempts
                let key = try AppStoreNotificationReceived.key(app: app, environment: environment, uuid: status.notificationUUID)
                result.recorded = try await store.recorded([key])[key]
                // Apple answers once it tried. Its next try of a failed one comes an hour or more
                // later, so the first try is the answer (the webhook records before it answers 200).
                if result.recorded != nil || !status.attempts.isEmpty { return result }
            }
            guard clock.now < deadline else { return result }
            try await Task.sleep(for: poll)
        }
    }

    // MARK: Shared

    private func connection(_ app: String, for what: String) async throws -> (any AppStoreServer, ServerAPIKey) {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        guard let server else { throw AppStoreQueryError(.notConfigured, "this ledger has no App Store Server API client, so it cannot \(what)") }
        let key: ServerAPIKey?
        do { key = try await directory.serverAPIKey(of: app) } catch let error as SecretError {
            throw AppStoreQueryError(.noServerAPIKey, "the App Store Server API key of \(app) cannot be opened: \(error.message)")
        }
        guard let key else {
            throw AppStoreQueryError(.noServerAPIKey, "\(app) has no App Store Server API key, so the ledger cannot \(what): add one with `ledger apps appstore-key \(app) --key-id … --issuer-id … --private-key FILE.p8`")
        }
        return (server, key)
    }

    static func refusal(_ error: any Error, asking what: String) -> AppStoreQueryError {
        switch error {
        case let error as AppStoreQueryError: return error
        case TransactionHistoryError.rateLimited(_, let reason): return AppStoreQueryError(.appStoreRateLimited, "\(what): \(reason); try again later")
        case TransactionHistoryError.refused(let reason): return AppStoreQueryError(.appStoreRefused, "\(what): \(reason)")
        case TransactionHistoryError.notFound(let reason): return AppStoreQueryError(.appStoreRefused, "\(what): \(reason)")
        case TransactionHistoryError.transactionNotFound(let id):
            return AppStoreQueryError(.appStoreRefused, "\(what): Apple knows no transaction \(id) in this environment (404)")
        default:
            return AppStoreQueryError(.appStoreUnavailable, "\(what) could not be had: \(error); check that the ledger reaches the App Store Server API, and try again")
        }
    }
}

/// A refused or failed question to Apple, in words for whoever asked.
public struct AppStoreQueryError: Error, Sendable, CustomStringConvertible {
    public enum Code: String, Sendable {
        case invalidInput = "invalid_request"
        case notConfigured = "appstore_not_configured"
        case noServerAPIKey = "no_server_api_key"
        case orderNotFound = "order_not_found"
        case appStoreRefused = "appstore_refused"
        case appStoreRateLimited = "appstore_rate_limited"
        case appStoreUnavailable = "appstore_unavailable"
    }

    public let code: Code
    public let message: String

    public init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { message }
}
