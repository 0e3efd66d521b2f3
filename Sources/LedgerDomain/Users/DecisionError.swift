/// A command the user's stream refuses, with what was wrong and what the stream holds.
public struct DecisionError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case insufficientBalance = "insufficient_balance"
        case notConsumable = "not_consumable"
        case invalidQuantity = "invalid_quantity"
        case unknownTransaction = "unknown_transaction"
        case unknownProduct = "unknown_product"
        case alreadyRevoked = "already_revoked"
        case invalidInput = "invalid_input"
        case tokenBoundToAnotherUser = "token_bound_to_another_user"
    }

    public let code: Code
    public let message: String
    /// For `insufficientBalance`: what the user has.
    public let balance: Int?

    private init(_ code: Code, _ message: String, balance: Int? = nil) {
        self.code = code
        self.message = message
        self.balance = balance
    }

    public static func insufficientBalance(productId: String, balance: Int, requested: Int) -> Self {
        .init(.insufficientBalance, "cannot consume \(requested) of \(productId): the balance is \(balance)", balance: balance)
    }

    public static func notConsumable(productId: String, type: ProductType) -> Self {
        .init(.notConsumable, "\(productId) is \(type.rawValue), not a consumable: only consumables can be consumed")
    }

    public static func invalidQuantity(_ quantity: Int) -> Self {
        .init(.invalidQuantity, "quantity must be a whole number from 1 to 1000000 (got \(quantity))")
    }

    public static func unknownTransaction(_ transactionId: String) -> Self {
        .init(.unknownTransaction, "transaction \(transactionId) is not recorded for this user")
    }

    /// No user of the app holds the transaction (a command naming it finds no stream to act on).
    public static func unrecordedTransaction(_ transactionId: String, app: String) -> Self {
        .init(.unknownTransaction, "transaction \(transactionId) is not recorded for any user of \(app)")
    }

    public static func unknownProduct(_ productId: String) -> Self {
        .init(.unknownProduct, "product \(productId) is neither in the app's catalog nor bought by this user")
    }

    public static func alreadyRevoked(_ transactionId: String) -> Self {
        .init(.alreadyRevoked, "transaction \(transactionId) is already revoked")
    }

    /// The `appAccountToken` is another user's: a token is bound to one user of the app, for ever.
    public static func tokenBoundToAnotherUser(_ token: String) -> Self {
        .init(.tokenBoundToAnotherUser,
              "appAccountToken \(token) is bound to another user of this app; a token is one user's for ever: give this user a token of their own")
    }

    public static func invalidInput(_ message: String) -> Self {
        .init(.invalidInput, message)
    }

    public var description: String { message }
}
