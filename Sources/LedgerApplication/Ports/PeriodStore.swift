import Foundation
import LedgerDomain

/// Where closed periods keep their rows, and how the audit trail is compared with them.
public protocol PeriodStore: Sendable {
    /// Keeps the app's audit rows of `[from, to)` under `closeId`, as they stand at one instant
    /// of the audit trail, and tells which.
    func keepRows(app: String, closeId: UUID, from: Date, to: Date) async throws -> KeptPeriodRows

    /// The kept rows added up per product, currency and environment (and all proceeds depend on).
    func keptParts(closeId: UUID) async throws -> [AuditSummaryPart]

    /// The rows of `[from, to)` that differ now from those kept under `closeId`, each with the
    /// first fact recorded after `position` that could have changed it.
    func changedRows(app: String, closeId: UUID, from: Date, to: Date, after position: Int64) async throws -> [ChangedPeriodRow]

    /// The audit trail's live version and when it became the version being built.
    func auditTrailVersion() async throws -> (version: Int, createdAt: Date)
}

/// What `keepRows` kept.
public struct KeptPeriodRows: Sendable, Hashable {
    public let position: Int64
    public let auditTrailVersion: Int
    public let rows: Int
    public let checksum: String

    public init(position: Int64, auditTrailVersion: Int, rows: Int, checksum: String) {
        self.position = position
        self.auditTrailVersion = auditTrailVersion
        self.rows = rows
        self.checksum = checksum
    }
}

/// One audit row of a closed period as it was kept and as it is now (nil on the side that lacks it).
public struct ChangedPeriodRow: Sendable, Hashable {
    public struct Values: Sendable, Hashable {
        public let environment: StoreEnvironment
        public let productId: String
        public let currency: String?
        public let quantity: Int
        public let amount: String?

        public init(environment: StoreEnvironment, productId: String, currency: String?, quantity: Int, amount: String?) {
            self.environment = environment
            self.productId = productId
            self.currency = currency
            self.quantity = quantity
            self.amount = amount
        }
    }

    /// A fact recorded after the close.
    public struct Fact: Sendable, Hashable {
        public let position: Int64
        public let type: String
        public let stream: String
        public let recordedAt: Date

        public init(position: Int64, type: String, stream: String, recordedAt: Date) {
            self.position = position
            self.type = type
            self.stream = stream
            self.recordedAt = recordedAt
        }
    }

    public let position: Int64
    public let event: String
    public let userId: String
    public let transactionId: String
    public let kept: Values?
    public let now: Values?
    /// The row's own fact when it was recorded after the close, else the first fact after the
    /// close in the user's stream or the app's catalog; nil when none (a replay).
    public let cause: Fact?

    public init(position: Int64, event: String, userId: String, transactionId: String, kept: Values?, now: Values?, cause: Fact?) {
        self.position = position
        self.event = event
        self.userId = userId
        self.transactionId = transactionId
        self.kept = kept
        self.now = now
        self.cause = cause
    }
}

/// Signs closes: the anchor key.
public protocol PeriodSigner: Sendable {
    /// The public key, PEM.
    var publicKeyPEM: String { get }
    func sign(_ message: Data) throws -> Data
}
