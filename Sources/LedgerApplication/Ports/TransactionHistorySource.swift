import Foundation
import LedgerDomain

/// Apple's own record of a customer's transactions (the App Store Server API's Get Transaction
/// History), each transaction signed by Apple and verified before it is returned.
public protocol TransactionHistorySource: Sendable {
    /// Every transaction of the customer who made `transactionId`, in `environment`, with the
    /// app's key. Throws `TransactionHistoryError`.
    func history(of transactionId: String, app: String, environment: StoreEnvironment, key: ServerAPIKey) async throws -> [HistoryTransaction]
}

/// One transaction of Apple's history: Apple's fields, as signed, and when Apple signed them.
public struct HistoryTransaction: Sendable, Hashable {
    public let fields: [String: String]
    public let signedDate: Date

    public init(fields: [String: String], signedDate: Date) {
        self.fields = fields
        self.signedDate = signedDate
    }
}

/// Why Apple's history could not be had.
public enum TransactionHistoryError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The App Store knows no such transaction in the environment asked (404).
    case transactionNotFound(String)
    /// Apple asked to slow down (429): nothing more is asked before `until`.
    case rateLimited(until: Date?, String)
    /// Apple knows no such thing (an order, a test notification not tried yet), in words.
    case notFound(String)
    /// Apple refused the request itself (a 400 with its error code): the same request gets the
    /// same answer, so it is not asked again.
    case refused(String)
    /// Anything else, in words (the key refused, Apple unreachable, an answer that cannot be read).
    case failed(String)

    public var description: String {
        switch self {
        case .transactionNotFound(let id): "the App Store knows no transaction \(id) in this environment (404)"
        case .rateLimited(_, let reason): reason
        case .notFound(let reason): reason
        case .refused(let reason): reason
        case .failed(let reason): reason
        }
    }
}
