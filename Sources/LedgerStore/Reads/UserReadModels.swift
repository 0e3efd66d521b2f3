import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import PostgresNIO

/// A user's rows in the projections, for the read routes.
public struct UserReadModels: Sendable {
    /// A row of `ledger.ownership`.
    public struct Owned: Sendable, Hashable {
        public let productId: String
        public let productType: ProductType
        public let originalTransactionId: String
        public let ownedSince: Date
        public let expiresAt: Date?

        /// The row as the entitlement rule takes it.
        public var owned: Entitlements.Owned {
            Entitlements.Owned(productId: productId, productType: productType, originalTransactionId: originalTransactionId,
                               ownedSince: ownedSince)
        }
    }

    /// A row of `ledger.consumable_balances`.
    public struct Balance: Sendable, Hashable {
        public let productId: String
        public let purchased: Int64
        public let consumed: Int64
        public let balance: Int64
        public let overdrawn: Bool

        /// The row as the entitlement rule takes it.
        public var consumableBalance: ConsumableBalance {
            ConsumableBalance(productId: productId, purchased: Int(purchased), consumed: Int(consumed))
        }
    }

    /// A row of `ledger.subscription_periods`.
    public struct Period: Sendable, Hashable {
        public let transactionId: String
        public let originalTransactionId: String
        public let productId: String
        public let group: String
        public let kind: SubscriptionKind
        public let start: Date
        public let end: Date

        /// The row as the entitlement rule takes it.
        public var period: SubscriptionPeriod {
            SubscriptionPeriod(transactionId: transactionId, productId: productId, group: group, kind: kind, start: start, end: end)
        }
    }

    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The position every named projection has reached (the smallest live checkpoint), nil when one has no live version yet.
    public func checkpoint(of projections: [ProjectionName]) async throws -> Int64? {
        let rows = try await client.query("""
            SELECT count(*), min(position) FROM ledger.projections WHERE status = \(ProjectionState.live) AND name = ANY(\(projections))
            """, logger: logger)
        for try await (count, position) in rows.decode((Int64, Int64?).self) {
            return count == Int64(projections.count) ? position : nil
        }
        return nil
    }

    /// Waits until every named projection reflects the log up to `position`, polling, at most `timeout`.
    /// Returns the checkpoint reached; throws `ReadError.projectionsBehind` with the checkpoint when time runs out
    /// (`projectionsNotReady` when one of them has no live version yet).
    public func waitForProjections(_ projections: [ProjectionName], toReach position: Int64, timeout: Duration) async throws -> Int64 {
        let deadline = ContinuousClock.now + timeout
        var delay = Duration.milliseconds(5)
        while true {
            // nil: a projection has no live version (no view) yet, whatever position was asked for.
            let reached = try await checkpoint(of: projections)
            if let reached, reached >= position { return reached }
            guard ContinuousClock.now + delay < deadline else {
                guard let reached else { throw ReadError.projectionsNotReady(projections) }
                throw ReadError.projectionsBehind(requested: position, reached: reached)
            }
            try await Task.sleep(for: delay)
            delay = min(delay * 2, .milliseconds(100))
        }
    }

    /// Whether the user has any event in the app.
    public func userExists(app: String, user: String) async throws -> Bool {
        let stream = try StreamID.user(app: app, user: user).rawValue
        let rows = try await client.query(
            "SELECT 1 FROM ledger.events WHERE stream_id = \(stream) LIMIT 1", logger: logger
        )
        for try await _ in rows { return true }
        return false
    }

    public func owned(app: String, user: String) async throws -> [Owned] {
        let rows = try await client.query("""
            SELECT product_id, product_type, original_transaction_id, owned_since, expires_at FROM ledger.ownership
            WHERE app = \(app) AND user_id = \(user) ORDER BY owned_since, product_id
            """, logger: logger)
        var result: [Owned] = []
        for try await (product, type, original, since, expires) in rows.decode((String, String, String, Date, Date?).self) {
            result.append(Owned(productId: product, productType: ProductType(rawValue: type) ?? .unknown, originalTransactionId: original,
                                ownedSince: since, expiresAt: expires))
        }
        return result
    }

    public func balances(app: String, user: String) async throws -> [Balance] {
        let rows = try await client.query("""
            SELECT product_id, purchased, consumed, balance, overdrawn FROM ledger.consumable_balances
            WHERE app = \(app) AND user_id = \(user) ORDER BY product_id
            """, logger: logger)
        var result: [Balance] = []
        for try await (product, purchased, consumed, balance, overdrawn) in rows.decode((String, Int64, Int64, Int64, Bool).self) {
            result.append(Balance(productId: product, purchased: purchased, consumed: consumed, balance: balance, overdrawn: overdrawn))
        }
        return result
    }

    public func periods(app: String, user: String) async throws -> [Period] {
        let rows = try await client.query("""
            SELECT transaction_id, original_transaction_id, product_id, subscription_group, kind, period_start, period_end
            FROM ledger.subscription_periods WHERE app = \(app) AND user_id = \(user) ORDER BY period_start, transaction_id
            """, logger: logger)
        var result: [Period] = []
        for try await (id, original, product, group, kind, start, end) in rows.decode((String, String, String, String, String, Date, Date).self) {
            guard let kind = SubscriptionKind(rawValue: kind) else {
                throw StoreError.integrity("ledger.subscription_periods holds kind '\(kind)', which this version does not know")
            }
            result.append(Period(transactionId: id, originalTransactionId: original, productId: product, group: group, kind: kind,
                                 start: start, end: end))
        }
        return result
    }
}

/// Why a read could not be answered.
public struct ReadError: Error, Hashable, Sendable, CustomStringConvertible {
    public enum Code: String, Hashable, Sendable {
        case projectionsBehind = "projections_behind"
    }

    public let code: Code
    public let message: String
    /// The position the projections have reached.
    public let position: Int64

    public static func projectionsBehind(requested: Int64, reached: Int64) -> Self {
        ReadError(
            code: .projectionsBehind,
            message: "the projections have reached log position \(reached), not yet \(requested); retry shortly",
            position: reached
        )
    }

    /// A read model with no live version yet: the server has just started on a new database, or
    /// the projections are being replaced. Their views do not exist until the runner sets them up.
    public static func projectionsNotReady(_ projections: [ProjectionName]) -> Self {
        ReadError(
            code: .projectionsBehind,
            message: "the projections \(projections.map(\.rawValue).joined(separator: ", ")) are being set up (the ledger is starting); retry shortly",
            position: 0
        )
    }

    public var description: String { message }
}
