import Foundation
import LedgerDomain

/// Apple's CONSUMPTION_REQUEST notifications about a user's purchases (a customer asked Apple for
/// a refund), newest first, each with what the ledger knows that Apple's consumption information
/// asks for: how much of the product the user bought and used, whether the purchase was
/// delivered, finished or already refunded; and for the account, when the user first paid and what
/// they paid and had refunded, per currency, in the request's environment; and the ledger's own
/// answer to Apple (`AnswerConsumptionRequests`): what it sent and Apple's answer, what it is
/// about to send, or why it does not answer. From the user's stream itself, so the figures are
/// the log's at its last position.
public struct ConsumptionRequests: Sendable {
    /// Every request of one user, as of the stream's last position.
    public struct Report: Encodable, Sendable {
        public let userId: String
        /// The position of the user's latest event: what the answer is as of.
        public let position: Int64
        /// Whether the user consented to Apple being told how they used their purchases, as the
        /// app last reported; null when it never did.
        @NullWhenAbsent public var customerConsented: Bool?
        public let requests: [Request]
    }

    /// The ledger's answer to one request.
    public struct Answer: Encodable, Sendable {
        /// `accepted` (Apple took it), `refused` (Apple refused it: `detail` says why), `pending`
        /// (to be sent by the leading server's next pass), `not_answered` (`detail` says why).
        public let state: String
        @NullWhenAbsent public var detail: String?
        /// Until when Apple takes an answer (12 hours after its request).
        public let answerBy: Date
        /// When it was sent and where that is in the log, for a sent answer.
        @NullWhenAbsent public var sentAt: Date?
        @NullWhenAbsent public var position: Int64?
        /// What was sent, or is to be sent.
        @NullWhenAbsent public var deliveryStatus: String?
        @NullWhenAbsent public var consumptionPercentage: Int?
        @NullWhenAbsent public var refundPreference: String?
        @NullWhenAbsent public var sampleContentProvided: Bool?
    }

    /// One request, with the figures Apple asks for. Absent values are written as null, so every
    /// item has the same keys.
    public struct Request: Encodable, Sendable {
        public let notificationUUID: String
        public let signedDate: Date
        public let position: Int64
        @NullWhenAbsent public var reason: String?
        @NullWhenAbsent public var transactionId: String?
        @NullWhenAbsent public var originalTransactionId: String?
        @NullWhenAbsent public var productId: String?
        @NullWhenAbsent public var productType: String?
        @NullWhenAbsent public var environment: String?
        /// Units of the product the user bought (less what refunds took back) and used, in all.
        @NullWhenAbsent public var unitsPurchased: Int?
        @NullWhenAbsent public var unitsConsumed: Int?
        public let delivered: Bool
        public let finished: Bool
        public let refunded: Bool
        @NullWhenAbsent public var account: Account?
        public let answer: Answer
    }

    /// What the account paid and had refunded in one environment, per currency.
    public struct Account: Encodable, Sendable {
        public let environment: String
        /// Null when the account has paid nothing yet in this environment (the schema requires the key).
        @NullWhenAbsent public var firstPaymentAt: Date?
        public let purchased: [Amount]
        public let refunded: [Amount]
    }

    public struct Amount: Encodable, Sendable {
        public let currency: String
        public let amount: String
    }

    let reader: UserStreamReader
    let directory: any AppDirectory
    let window: Duration

    public init(reader: UserStreamReader, directory: any AppDirectory, window: Duration = AnswerConsumptionRequests.Configuration().window) {
        self.reader = reader
        self.directory = directory
        self.window = window
    }

    /// The user's requests; throws `DecisionError.unknownUser` for a user with no event.
    public func callAsFunction(app: String, user: String, now: Date = Date()) async throws -> Report {
        let state = try await reader.state(app: app, user: user)
        guard state.version > 0 else { throw ReadError.unknownUser(user) }
        let settings = try await directory.consumptionAnswerSettings(of: app)
        // A key that cannot be opened here cannot be opened by the answering server either.
        let hasKey = ((try? await directory.serverAPIKey(of: app)) ?? nil) != nil
        return Self.report(user: user, state: state, settings: settings, hasKey: hasKey, now: now, window: window)
    }

    /// The report of a user's stream: a pure function of the facts, the app's settings and the time.
    public static func report(
        user: String, state: UserLedger, settings: ConsumptionAnswerSettings = .init(), hasKey: Bool = false, now: Date = Date(),
        window: Duration = AnswerConsumptionRequests.Configuration().window
    ) -> Report {
        let items = state.facts.notifications.filter { $0.type == "CONSUMPTION_REQUEST" }.reversed().map { notification -> Request in
            let transaction = notification.transactionId.flatMap { state.transactions[$0] }
            let product = transaction?.productId
            return Request(
                notificationUUID: notification.uuid, signedDate: notification.signedDate, position: notification.at.position,
                reason: notification.consumptionRequestReason, transactionId: notification.transactionId,
                originalTransactionId: notification.originalTransactionId, productId: product, productType: transaction?.productType.rawValue,
                environment: transaction?.environment.rawValue,
                unitsPurchased: product.map(state.purchasedUnits(of:)),
                unitsConsumed: product.map { state.consumed[$0, default: 0] },
                delivered: transaction.map { transaction in
                    // A device posted it, or the ledger restored it to one.
                    transaction.deviceId != nil || state.deliveredToDevice.values.contains { $0.contains(transaction.transactionId) }
                } ?? false,
                finished: notification.transactionId.map(state.isFinished) ?? false,
                refunded: transaction?.isRevoked ?? false,
                account: transaction.map { account($0.environment, of: state) },
                answer: answer(to: notification, state: state, settings: settings, hasKey: hasKey, now: now, window: window)
            )
        }
        return Report(userId: user, position: state.lastPosition, customerConsented: state.consumptionConsent, requests: items)
    }

    private static func answer(
        to notification: TransactionFacts.Notification, state: UserLedger, settings: ConsumptionAnswerSettings, hasKey: Bool, now: Date, window: Duration
    ) -> Answer {
        let answerBy = notification.signedDate + window.inSeconds
        switch AnswerConsumptionRequests.plan(for: notification, state: state, settings: settings, hasKey: hasKey, now: now, window: window) {
        case .answered(let answer):
            let sent = answer.sent
            return Answer(state: sent.accepted ? "accepted" : "refused", detail: sent.detail, answerBy: answerBy, sentAt: answer.recordedAt,
                          position: answer.position, deliveryStatus: sent.deliveryStatus, consumptionPercentage: sent.consumptionPercentage,
                          refundPreference: sent.refundPreference, sampleContentProvided: sent.sampleContentProvided)
        case .send(_, _, let information):
            return Answer(state: "pending", detail: "sent by the server leading the projections at its next pass (every minute)", answerBy: answerBy,
                          deliveryStatus: information.deliveryStatus, consumptionPercentage: information.consumptionPercentage,
                          refundPreference: information.refundPreference, sampleContentProvided: information.sampleContentProvided)
        case .notAnswered(let why):
            return Answer(state: "not_answered", detail: why, answerBy: answerBy)
        }
    }

    private static func account(_ environment: StoreEnvironment, of state: UserLedger) -> Account {
        var purchased: [String: Decimal] = [:], refunded: [String: Decimal] = [:]
        var first: Date?
        for transaction in state.transactionsInOrder where transaction.environment == environment && transaction.kind.isPayment && !transaction.isFamilyShared {
            first = min(first ?? transaction.purchaseDate, transaction.purchaseDate)
            guard let amount = transaction.amount.flatMap({ Decimal(string: $0) }), let currency = transaction.currency else { continue }
            purchased[currency, default: 0] += amount
            if let back = transaction.refundedAmount.flatMap({ Decimal(string: $0) }) { refunded[currency, default: 0] += back }
        }
        func list(_ sums: [String: Decimal]) -> [Amount] {
            sums.keys.sorted().map { Amount(currency: $0, amount: NSDecimalNumber(decimal: sums[$0]!).stringValue) }
        }
        return Account(environment: environment.rawValue, firstPaymentAt: first, purchased: list(purchased), refunded: list(refunded))
    }
}
