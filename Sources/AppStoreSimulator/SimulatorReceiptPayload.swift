import AppStore
import LedgerDomain

/// What a simulator receipt says: who bought what, where. Signed, so it cannot be edited.
struct SimulatorReceiptPayload: Codable, Hashable, Sendable {
    enum Kind: String, Codable, Sendable {
        /// An iOS 7 style app receipt: every transaction of the user in the app when it was issued.
        case app
        /// An iOS 6 style transaction receipt: one transaction.
        case transaction
    }

    var kind: Kind
    var environment: StoreEnvironment
    var bundleId: String
    var userId: String
    var transactionIds: [String]
    /// Epoch milliseconds of the simulator's clock when the receipt was issued.
    var issuedAt: Int64
}
