import Foundation
import LedgerDomain

/// A read model derived from the log: a name, a version, its table and a pure fold.
///
/// Every projection here is a function of one user's stream: the stream folded into a
/// `UserLedger` (the same fold the decisions use) and the app's catalog give the user's rows. The
/// runner recomputes a user's rows whenever their stream grows, so applying a batch twice, or
/// rebuilding from position 0, gives the same rows. Changing what `rows` derives means bumping
/// `version`: the runner then builds the new version beside the live one.
public protocol UserProjection: Sendable {
    /// Stable name of the read model, e.g. `ownership`; its tables and view carry it.
    static var name: String { get }
    /// Bumped whenever `rows` changes what it derives.
    static var version: Int { get }
    /// The table's columns after `app` and `user_id`, which every projection starts with.
    static var columns: [ProjectionColumn] { get }
    /// Columns (after app and user_id) that identify a row, for diffs between versions.
    static var keyColumns: [String] { get }
    /// Indexes beyond the one on (app, user_id) every table has, each a list of column names.
    static var indexes: [[String]] { get }

    /// The user's rows, each value in the order of `columns` as text (nil for NULL). Pure.
    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]]
}

/// One column of a projection's table.
public struct ProjectionColumn: Hashable, Sendable {
    public let name: String
    /// The PostgreSQL type, e.g. `text`, `bigint`, `timestamptz`.
    public let type: String
    /// A comment for readers of the table (finance reads these with SQL).
    public let meaning: String

    public init(_ name: String, _ type: String, _ meaning: String) {
        self.name = name
        self.type = type
        self.meaning = meaning
    }
}

extension UserProjection {
    /// The versioned table's name, e.g. `ownership_v1`.
    public static var tableName: String { "\(name)_v\(version)" }

    /// None beyond (app, user_id) unless a projection names some.
    public static var indexes: [[String]] { [] }

    /// Text for a timestamp column.
    static func text(_ date: Date?) -> String? {
        date.map(LedgerJSON.formatTimestamp)
    }
}

/// The projections the ledger maintains.
public enum Projections {
    public static let all: [any UserProjection.Type] = [
        OwnershipProjection.self,
        ConsumableBalancesProjection.self,
        SubscriptionPeriodsProjection.self,
        DeviceDeliveriesProjection.self,
        AuditTrailProjection.self,
        UnfinishedTransactionsProjection.self,
    ]

    /// The projection of this name, if there is one.
    public static func named(_ name: String) -> (any UserProjection.Type)? {
        all.first { $0.name == name }
    }
}
