import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerStore

extension LedgerAPI {
    /// `GET /v1/apps/{bundleId}/users/{userId}/consumption-requests`: the CONSUMPTION_REQUEST
    /// notifications Apple sent about the user's purchases (a customer asked for a refund), newest
    /// first, each with what the ledger knows that Apple's consumption information asks for: how
    /// much of the product the user bought and used, whether the purchase was delivered, finished
    /// or already refunded; and for the account, when the user first paid and what they paid and
    /// had refunded, per currency, in the request's environment. The app answers Apple with it
    /// (Send Consumption Information); the ledger sends nothing itself.
    func consumptionRequests(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        let state = try await handler.reader.state(app: app, user: user)
        guard state.version > 0 else { throw APIError.unknownUser(user) }

        struct Amount: Encodable { let currency: String; let amount: String }
        struct Account: Encodable {
            let environment: String
            /// Null when the account has paid nothing yet in this environment (the schema requires the key).
            @NullWhenAbsent var firstPaymentAt: Date?
            let purchased: [Amount]
            let refunded: [Amount]
        }
        /// Absent values are written as null, so every item has the same keys.
        struct Item: Encodable {
            let notificationUUID: String
            let signedDate: Date
            let position: Int64
            @NullWhenAbsent var reason: String?
            @NullWhenAbsent var transactionId: String?
            @NullWhenAbsent var originalTransactionId: String?
            @NullWhenAbsent var productId: String?
            @NullWhenAbsent var productType: String?
            @NullWhenAbsent var environment: String?
            /// Units of the product the user bought (live purchases) and used, in all.
            @NullWhenAbsent var unitsPurchased: Int?
            @NullWhenAbsent var unitsConsumed: Int?
            let delivered: Bool
            let finished: Bool
            let refunded: Bool
            @NullWhenAbsent var account: Account?
        }
        struct Answer: Encodable { let userId: String; let position: Int64; let requests: [Item] }

        func account(_ environment: StoreEnvironment) -> Account {
            var purchased: [String: Decimal] = [:], refunded: [String: Decimal] = [:]
            var first: Date?
            for transaction in state.transactionsInOrder where transaction.environment == environment && transaction.kind.isPayment && !transaction.isFamilyShared {
                first = min(first ?? transaction.purchaseDate, transaction.purchaseDate)
                guard let price = transaction.price.flatMap({ Decimal(string: $0) }), let currency = transaction.currency else { continue }
                let amount = price * Decimal(transaction.quantity)
                purchased[currency, default: 0] += amount
                if transaction.isRevoked { refunded[currency, default: 0] += amount }
            }
            func list(_ sums: [String: Decimal]) -> [Amount] {
                sums.keys.sorted().map { Amount(currency: $0, amount: NSDecimalNumber(decimal: sums[$0]!).stringValue) }
            }
            return Account(environment: environment.rawValue, firstPaymentAt: first, purchased: list(purchased), refunded: list(refunded))
        }

        let items = state.facts.notifications.filter { $0.type == "CONSUMPTION_REQUEST" }.reversed().map { notification -> Item in
            let transaction = notification.transactionId.flatMap { state.transactions[$0] }
            let product = transaction?.productId
            return Item(
                notificationUUID: notification.uuid, signedDate: notification.signedDate, position: notification.at.position,
                reason: notification.consumptionRequestReason, transactionId: notification.transactionId,
                originalTransactionId: notification.originalTransactionId, productId: product, productType: transaction?.productType.rawValue,
                environment: transaction?.environment.rawValue,
                unitsPurchased: product.map { product in
                    state.transactions(ofProduct: product).filter { $0.kind == .purchase && !$0.isRevoked }.reduce(0) { $0 + $1.quantity }
                },
                unitsConsumed: product.map { state.consumed[$0, default: 0] },
                delivered: transaction.map { transaction in
                    // A device posted it, or the ledger restored it to one.
                    transaction.deviceId != nil || state.deliveredToDevice.values.contains { $0.contains(transaction.transactionId) }
                } ?? false,
                finished: notification.transactionId.map(state.isFinished) ?? false,
                refunded: transaction?.isRevoked ?? false,
                account: transaction.map { account($0.environment) }
            )
        }
        // The position of the user's latest event: what the answer is as of.
        return try APIJSON.response(Answer(userId: user, position: state.lastPosition, requests: items))
    }
}
