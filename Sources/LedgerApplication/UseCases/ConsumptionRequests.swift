import Foundation
import LedgerDomain

/// Apple's CONSUMPTION_REQUEST notifications about a user's purchases (a customer asked Apple for
/// a refund), newest first, each with what the ledger knows that Apple's consumption information
/// asks for: how much of the product the user bought and used, whether the purchase was
/// delivered, finished or already refunded; and for the account, when the user first paid and what
/// they paid and had refunded, per currency, in the request's environment. From the user's stream
/// itself, so the figures are the log's at its last position.
public struct ConsumptionRequests: Sendable {
    /// Every request of one user, as of the stream's last position.
    public struct Report: Encodable, Sendable {
        public let userId: String
        /// The position of the user's latest event: what the answer is as of.
        public let position: Int64
        public let requests: [Request]
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

    public init(reader: UserStreamReader) {
        self.reader = reader
    }

    /// The user's requests; throws `DecisionError.unknownUser` for a user with no event.
    public func callAsFunction(app: String, user: String) async throws -> Report {
        let state = try await reader.state(app: app, user: user)
        guard state.version > 0 else { throw ReadError.unknownUser(user) }
        return Self.report(user: user, state: state)
    }

    /// The report of a user's stream: a pure function of the facts.
    public static func report(user: String, state: UserLedger) -> Report {
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
                account: transaction.map { account($0.environment, of: state) }
            )
        }
        return Report(userId: user, position: state.lastPosition, requests: items)
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
