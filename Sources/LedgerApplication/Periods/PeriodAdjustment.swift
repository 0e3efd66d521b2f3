import Foundation
import LedgerDomain

/// A change to a closed period's figures the ledger learned after the close: booked in the first
/// period open when it was learned, never in the closed one, and naming what caused it.
public struct PeriodAdjustment: Sendable, Hashable, Codable {
    public enum Kind: String, Sendable, Hashable, Codable {
        /// A row the close did not have (a refund dated in the period, a late notification, a backfill).
        case added
        /// A row the close had that the audit trail no longer has.
        case removed
        /// A row the audit trail now sees otherwise (a later fact, a replay of a fixed fold).
        case changed
    }

    /// Why.
    public struct Cause: Sendable, Hashable, Codable {
        public enum Kind: String, Sendable, Hashable, Codable {
            /// A fact recorded after the close.
            case fact
            /// The audit trail was rebuilt by a newer fold (a replay after a fix).
            case replay
        }

        public let kind: Kind
        /// The fact's log position, type, stream and time (facts only).
        public let position: Int64?
        public let type: String?
        public let stream: String?
        public let recordedAt: Date?
        public let message: String
    }

    /// The closed period it changes (`yyyy-MM`).
    public let closedPeriod: String
    /// The period it is booked in: the first open when the ledger learned of it.
    public let bookedIn: String
    public let kind: Kind
    /// The audit row: log position and event, user and transaction.
    public let position: Int64
    public let event: String
    public let userId: String
    public let transactionId: String
    public let environment: StoreEnvironment
    public let productId: String
    public let currency: String?
    /// Units and money of the row at the close and now (nil on the side without it).
    public let quantityBefore: Int?
    public let quantityAfter: Int?
    public let amountBefore: String?
    public let amountAfter: String?
    /// What it changes the period's net by, in `currency`: more money taken adds, more refunded subtracts.
    public let netChange: String
    public let cause: Cause
}

/// A period's standing: open, closed (with its figures), or reopened.
public struct PeriodStatus: Sendable, Hashable, Codable {
    public enum State: String, Sendable, Hashable, Codable {
        case closed
        case reopened
    }

    public let period: String
    public let state: State
    /// The latest close (the one in force when `closed`).
    public let closeId: UUID
    public let closePosition: Int64
    public let closedAt: Date
    public let closedBy: String
    public let timeZone: String
    public let from: Date
    public let to: Date
    /// The log position of the close's fact.
    public let factPosition: Int64
    /// Whether the close's signature verifies with its own public key.
    public let signatureValid: Bool
    public let publicKey: String
    public let figures: [PeriodClosed.Figure]
    /// Every close and reopening of the period, oldest first.
    public let history: [String]
}
