import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import Logging
import Synchronization

/// Writes a realistic synthetic history through the real decision path, for demos and benchmarks.
///
/// Each app gets a catalog with every product type. Each user buys consumables and uses some,
/// buys a non-consumable and re-buys or restores it on other devices, subscribes (auto-renewable,
/// renewing monthly until it lapses), stacks non-renewing periods, finishes most transactions,
/// sometimes gets refunded, and sometimes posts the same receipt twice. Every fourth round also
/// brings one of Apple's other shapes: a restored period sharing its web order, an upgrade that
/// cuts a period short, a family member's copy, a free trial of a product the catalog lacks, a
/// restore of a purchase the ledger never saw, a refund that arrives with its transaction, or
/// StoreKit 2's view of a multi-unit purchase abroad or of a renewal, refunded in part; now and
/// then a device reports euros. The same seed writes the same history.
public struct HistorySeeder: Sendable {
    public struct Options: Sendable {
        public var apps: Int
        public var users: Int
        public var events: Int
        public var concurrency: Int
        public var seed: UInt64

        public init(apps: Int, users: Int, events: Int, concurrency: Int = 16, seed: UInt64 = 42) {
            self.apps = apps
            self.users = users
            self.events = events
            self.concurrency = concurrency
            self.seed = seed
        }
    }

    public struct Progress: Sendable {
        public let events: Int
        public let target: Int
        public let elapsed: Duration
    }

    let handler: UserCommandHandler
    /// Receipts are recorded as the receipts route records them.
    let recordFacts: RecordAppStoreFacts
    let logger: Logger
    private let commandsRun = CommandTally()

    public init(ledger: PostgresLedger, logger: Logger) {
        self.handler = ledger.handler
        self.recordFacts = ledger.recordFacts
        self.logger = logger
    }

    /// Commands this seeder has run so far (one read, decision and append each; a duplicate
    /// submission appends nothing but is a command all the same).
    public var commands: Int { commandsRun.count.load(ordering: .relaxed) }

    public static func app(_ index: Int) -> String { "com.example.seed\(index)" }

    public static func catalog() throws -> [Product] {
        [
            try Product(productId: "coins.100", type: .consumable, referenceName: "100 coins", prices: ["USD": "0.99", "EUR": "0.99"]),
            try Product(productId: "coins.1000", type: .consumable, referenceName: "1000 coins", prices: ["USD": "7.99"]),
            try Product(productId: "levels.pack", type: .nonConsumable, referenceName: "Level pack", prices: ["USD": "2.99"]),
            try Product(productId: "pro.monthly", type: .autoRenewable, duration: ISODuration(parsing: "P1M"), subscriptionGroup: "pro",
                        prices: ["USD": "4.99"]),
            try Product(productId: "pro.yearly", type: .autoRenewable, duration: ISODuration(parsing: "P1Y"), subscriptionGroup: "pro",
                        prices: ["USD": "39.99"]),
            try Product(productId: "gold.month", type: .nonRenewing, duration: ISODuration(parsing: "P1M"), subscriptionGroup: "gold", prices: ["USD": "3.99"]),
            try Product(productId: "gold.week", type: .nonRenewing, duration: ISODuration(parsing: "P7D"), subscriptionGroup: "gold", prices: ["USD": "1.49"]),
            try Product(productId: "news.free", type: .freeSubscription),
        ]
    }

    /// Seeds until at least `events` events are in the log, and every user has lived one round;
    /// returns how many were appended.
    public func run(_ options: Options, progress: @escaping @Sendable (Progress) -> Void = { _ in }) async throws -> Int {
        guard options.apps >= 1, options.users >= 1, options.events >= 1, options.concurrency >= 1 else {
            throw StoreError.invalidInput("a seeded history needs at least 1 app, 1 user, 1 event and 1 writer")
        }
        for app in 0..<options.apps {
            for product in try Self.catalog() { try await handler.defineProduct(product, app: Self.app(app)) }
        }
        let counter = EventCounter()
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<options.concurrency {
                group.addTask {
                    var random = SplitMix(seed: options.seed &+ UInt64(worker) &* 7919)
                    // Each worker owns the users u with u % concurrency == worker: no contention.
                    var round = 0
                    while await counter.total < options.events {
                        var wroteAny = false
                        for user in stride(from: worker, to: options.users, by: options.concurrency) {
                            // Every user lives one round at least, so that every user exists.
                            if round > 0, await counter.total >= options.events { return }
                            let written = try await step(round: round, user: user, app: Self.app(user % options.apps), random: &random)
                            let total = await counter.add(written)
                            wroteAny = wroteAny || written > 0
                            if total / 10_000 != (total - written) / 10_000 {
                                progress(Progress(events: total, target: options.events, elapsed: .now - started))
                            }
                        }
                        round += 1
                        if !wroteAny && round > 1_000 { return }
                    }
                }
            }
            try await group.waitForAll()
        }
        return await counter.total
    }

    /// One round of a user's life; returns the events it appended.
    private func step(round: Int, user index: Int, app: String, random: inout SplitMix) async throws -> Int {
        let user = "user-\(index)"
        let base = Date(timeIntervalSince1970: 1_704_067_200 + Double(index % 10_000) * 600 + Double(round) * 86_400 * 30)
        let device = "device-\(index)-\(round % 3)"
        let id = { (kind: String) in "\(index)\(String(format: "%04d", round))\(kind)" }
        // What the App Store would list, field by field, as the ledger records it.
        var transactions: [[String: String]] = []
        let environment: StoreEnvironment = random.next() % 20 == 0 ? .sandbox : .production
        func fields(_ transactionId: String, _ original: String, _ product: String, quantity: Int, purchased: Date, expires: Date?) -> [String: String] {
            var fields = ["transaction_id": transactionId, "original_transaction_id": original, "product_id": product,
                          "quantity": String(quantity), "purchase_date_ms": String(purchased.milliseconds),
                          "in_app_ownership_type": "PURCHASED", "is_trial_period": "false"]
            if let expires {
                fields["expires_date_ms"] = String(expires.milliseconds)
                fields["web_order_line_item_id"] = "9\(transactionId)"
            }
            return fields
        }
        func purchase(_ product: String, _ kind: String, quantity: Int = 1, offset: Double = 0, expires: Date? = nil) {
            transactions.append(fields(id(kind), id(kind), product, quantity: quantity, purchased: base.addingTimeInterval(offset), expires: expires))
        }
        switch round % 4 {
        case 0:
            purchase("coins.100", "1", quantity: 1 + Int(random.next() % 3))
            purchase("levels.pack", "2", offset: 60)
            purchase("news.free", "3", offset: 90)
            purchase("pro.monthly", "4", offset: 120, expires: base.addingTimeInterval(120 + 30 * 86_400))
        case 1:
            purchase("gold.month", "5")
            purchase("gold.week", "6", offset: 3_600)
            purchase("coins.1000", "7", offset: 7_200)
        case 2:
            // A renewal of the first round's subscription, and a re-purchase of the owned pack.
            let original = "\(index)\(String(format: "%04d", round - 2))4"
            transactions.append(fields(id("8"), original, "pro.monthly", quantity: 1, purchased: base,
                                       expires: base.addingTimeInterval(30 * 86_400)))
            purchase("levels.pack", "9", offset: 30)
        default:
            purchase("coins.100", "0", quantity: 2)
            // Apple's other shapes, in turn across users and rounds, so that every history of a few users holds them all.
            let subscription = "\(index)\(String(format: "%04d", round - 3))4"
            let renewal = "\(index)\(String(format: "%04d", round - 1))8"
            let subscribed = base.addingTimeInterval(120 - 3 * 86_400 * 30)
            switch (index + round / 4) % 6 {
            case 0:
                // A restored period: a new id sharing the purchase's web order.
                var restored = fields(id("r"), subscription, "pro.monthly", quantity: 1, purchased: subscribed,
                                      expires: subscribed.addingTimeInterval(30 * 86_400))
                restored["web_order_line_item_id"] = "9\(subscription)"
                transactions.append(restored)
            case 1:
                // An upgrade: the renewal's period cut short (is_upgraded), the new product in the chain.
                var upgraded = fields(renewal, subscription, "pro.monthly", quantity: 1, purchased: base.addingTimeInterval(-60 * 86_400),
                                      expires: base.addingTimeInterval(-30 * 86_400))
                upgraded["is_upgraded"] = "true"
                upgraded["cancellation_date_ms"] = String(base.addingTimeInterval(-40 * 86_400).milliseconds)
                transactions.append(upgraded)
                transactions.append(fields(id("u"), subscription, "pro.yearly", quantity: 1, purchased: base.addingTimeInterval(-40 * 86_400),
                                           expires: base.addingTimeInterval(325 * 86_400)))
            case 2:
                // A family member's copy: access, no money.
                var shared = fields(id("f"), id("f"), "levels.pack", quantity: 1, purchased: base, expires: nil)
                shared["in_app_ownership_type"] = "FAMILY_SHARED"
                transactions.append(shared)
            case 3:
                // A free trial of a product the catalog does not define.
                var trial = fields(id("t"), id("t"), "trial.weekly", quantity: 1, purchased: base, expires: base.addingTimeInterval(7 * 86_400))
                trial["is_trial_period"] = "true"
                transactions.append(trial)
            case 4:
                // A restore of a purchase made before the ledger saw this user.
                transactions.append(fields(id("o"), "origin-\(index)", "levels.pack", quantity: 1, purchased: base, expires: nil))
            default:
                // Refunded by Apple: the cancellation arrives with the transaction.
                var refunded = fields(id("c"), id("c"), "coins.1000", quantity: 1, purchased: base, expires: nil)
                refunded["cancellation_date_ms"] = String(base.addingTimeInterval(3_600).milliseconds)
                refunded["cancellation_reason"] = "0"
                transactions.append(refunded)
            }
            // And one of StoreKit 2's views, in turn.
            if (index + round / 4) % 2 == 0 {
                // StoreKit 2's view of three coins bought in France: Apple's price is the total, in
                // euros; one of the three refunded since (33.333 % of the quantity).
                transactions.append(Self.signed(id("s"), "coins.100", type: "Consumable", quantity: 3, price: "2970", currency: "EUR",
                                                storefront: "FRA", purchased: base, signed: base.addingTimeInterval(86_400),
                                                revocation: (base.addingTimeInterval(86_400), "REFUND_PRORATED", 33333)))
            } else {
                // StoreKit 2's view of a monthly renewal in the United States, refunded in part.
                transactions.append(Self.signed(id("p"), subscription, type: "Auto-Renewable Subscription", product: "pro.monthly",
                                                quantity: 1, price: "4990", currency: "USD", storefront: "USA", purchased: base,
                                                expires: base.addingTimeInterval(30 * 86_400), signed: base.addingTimeInterval(3_600),
                                                revocation: (base.addingTimeInterval(3_600), "REFUND_PRORATED", 40000)))
            }
        }
        let receipt = try Self.receipt("seed \(user) \(round)", app: app, environment: environment, answeredAt: base, transactions: transactions)
        let transactionIds = transactions.compactMap { $0["transaction_id"] ?? $0["transactionId"] }
        // Now and then the device reports euros: the user's currency changes over time.
        let currency = (index + round) % 5 == 0 ? "EUR" : "USD"
        var written = try await record(receipt, app: app, user: user, device: device, currency: currency)
        if random.next() % 5 == 0 {
            written += try await record(receipt, app: app, user: user, device: device, currency: currency)  // a duplicate submission
        }
        written += try await execute(app: app, user: user) { state, catalog in
            var events: [PendingEvent] = []
            for transactionId in transactionIds where state.transactions[transactionId] != nil
                && !state.isFinished(transactionId) && random.next() % 10 != 0 {
                events.append(PendingEvent(.transactionFinished(TransactionFinished(transactionId: transactionId, deviceId: device))))
            }
            let balance = state.balance(of: "coins.100")
            if balance > 0 {
                events += try UserDecisions.consume(productId: "coins.100", quantity: 1 + Int(random.next() % UInt64(balance)),
                                                    deviceId: device, catalog: catalog, on: state)
            }
            if random.next() % 25 == 0, let victim = transactionIds.first, let recorded = state.transactions[victim], !recorded.isRevoked {
                events += try UserDecisions.revoke(transactionId: victim, revokedAt: base.addingTimeInterval(86_400),
                                                   reason: "refunded by Apple", on: state)
            }
            if round % 4 == 1 {
                events += UserDecisions.restoreNonRenewing(toDevice: "device-\(index)-restored", catalog: catalog, on: state).events
            }
            return events
        }
        return written
    }

    /// Records one purchase of `product` (which the catalog may not know yet) for a seeded user:
    /// a receipt as the App Store would answer it. Returns the events appended.
    public func purchase(_ product: String, quantity: Int = 1, user index: Int, app: String) async throws -> Int {
        let user = "user-\(index)"
        let bought = Date(timeIntervalSince1970: 1_704_067_200 + Double(index % 10_000) * 600)
        let transactionId = "\(index)-\(product)"
        let fields = ["transaction_id": transactionId, "original_transaction_id": transactionId, "product_id": product,
                      "quantity": String(quantity), "purchase_date_ms": String(bought.milliseconds),
                      "in_app_ownership_type": "PURCHASED", "is_trial_period": "false"]
        let receipt = try Self.receipt("purchase \(user) \(product)", app: app, environment: .production, answeredAt: bought, transactions: [fields])
        return try await record(receipt, app: app, user: user, device: "device-\(index)-0")
    }

    /// A receipt as the App Store would answer it: `text` stands for the receipt, the
    /// transactions' fields as JSON for the answer, each named by its digest.
    static func receipt(
        _ text: String, app: String, environment: StoreEnvironment, answeredAt: Date, transactions: [[String: String]]
    ) throws -> (answer: AppStoreAnswer, document: AppStoreDocument) {
        let json = try LedgerJSON.encode(transactions)
        let document = AppStoreDocument(
            app: app, receiptHash: ContentHash.sha256Hex(text), receiptData: text, answerHash: ContentHash.sha256Hex(json),
            environment: environment.rawValue, status: 0, answeredAt: answeredAt, answer: Data(json.utf8)
        )
        let answer = AppStoreAnswer(receiptHash: document.receiptHash, answerHash: document.answerHash, environment: environment, status: 0,
                                    answeredAt: answeredAt, transactions: transactions, renewalInfo: [])
        return (answer, document)
    }

    /// A transaction in StoreKit 2's naming (`JWSTransactionDecodedPayload`), as the transactions
    /// route records it: Apple's `price` in milliunits for the whole quantity, the storefront, and
    /// how a refund took it back.
    static func signed(
        _ transactionId: String, _ original: String? = nil, type: String, product: String? = nil, quantity: Int, price: String,
        currency: String, storefront: String, purchased: Date, expires: Date? = nil, signed: Date,
        revocation: (date: Date, type: String, percentage: Int?)? = nil
    ) -> [String: String] {
        var fields = [
            "transactionId": transactionId, "originalTransactionId": original ?? transactionId, "productId": product ?? "coins.100",
            "type": type, "quantity": String(quantity), "purchaseDate": String(purchased.milliseconds),
            "originalPurchaseDate": String(purchased.milliseconds), "price": price, "currency": currency, "storefront": storefront,
            "storefrontId": storefront == "FRA" ? "143442" : "143441", "inAppOwnershipType": "PURCHASED", "environment": "Production",
            "signedDate": String(signed.milliseconds), "transactionReason": "PURCHASE",
        ]
        if let expires {
            fields["expiresDate"] = String(expires.milliseconds)
            fields["webOrderLineItemId"] = "8\(transactionId)"
        }
        if let revocation {
            fields["revocationDate"] = String(revocation.date.milliseconds)
            fields["revocationReason"] = "0"
            fields["revocationType"] = revocation.type
            fields["revocationPercentage"] = revocation.percentage.map(String.init)
        }
        return fields
    }

    /// Records a receipt through the use case the receipts route calls, with the device's price.
    private func record(
        _ receipt: (answer: AppStoreAnswer, document: AppStoreDocument), app: String, user: String, device: String, currency: String = "USD"
    ) async throws -> Int {
        let post = RecordAppStoreFacts.Post(app: app, userId: user, deviceId: device, price: "0.99", currency: currency,
                                            metadata: ["source": "ledger-bench seed"])
        let recording = try await recordFacts.record(receipt.answer, document: receipt.document, post: post)
        commandsRun.count.add(1, ordering: .relaxed)
        return recording.recorded.count
    }

    private func execute(app: String, user: String, _ decide: (UserLedger, ProductCatalog) throws -> [PendingEvent]) async throws -> Int {
        let outcome = try await handler.execute(app: app, user: user, metadata: ["source": "ledger-bench seed"]) { state, catalog in
            (try decide(state, catalog), ())
        }
        commandsRun.count.add(1, ordering: .relaxed)
        return outcome.append?.appendedCount ?? 0
    }
}

/// Commands run, across workers.
final class CommandTally: Sendable {
    let count = Atomic<Int>(0)
}

/// Events written so far, across workers.
actor EventCounter {
    private(set) var total = 0
    func add(_ count: Int) -> Int {
        total += count
        return total
    }
}

/// A small deterministic random generator (SplitMix64).
public struct SplitMix: Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
