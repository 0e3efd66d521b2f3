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
    /// One row of the read model, typed.
    associatedtype Row: ProjectionRow

    /// Stable name of the read model, e.g. `ownership`; its tables and view carry it.
    static var name: ProjectionName { get }
    /// Bumped whenever `rows` changes what it derives.
    static var version: Int { get }
    /// The table's columns after `app` and `user_id`, which every projection starts with.
    static var columns: [ProjectionColumn] { get }
    /// Columns (after app and user_id) that identify a row, for diffs between versions.
    static var keyColumns: [String] { get }
    /// Indexes beyond the one on (app, user_id) every table has, each a list of column names.
    static var indexes: [[String]] { get }

    /// The user's rows. Pure.
    static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row]
}

/// A projection's row as the store writes it.
public protocol ProjectionRow: Hashable, Sendable {
    /// The values in the order of the projection's `columns`, as text (nil for NULL).
    var columnValues: [String?] { get }
}

/// The name of a read model: its view is `ledger.<name>`, its tables `ledger.<name>_v<version>`.
public struct ProjectionName: RawRepresentable, Hashable, Sendable, CustomStringConvertible, ExpressibleByStringLiteral {
    public let rawValue: String

    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    public init(stringLiteral value: String) {
        self.rawValue = value
    }

    public var description: String { rawValue }

    public static let ownership: Self = "ownership"
    public static let consumableBalances: Self = "consumable_balances"
    public static let subscriptionPeriods: Self = "subscription_periods"
    public static let deviceDeliveries: Self = "device_deliveries"
    public static let auditTrail: Self = "audit_trail"
    public static let unfinishedTransactions: Self = "unfinished_transactions"
}

/// One column of a projection's table.
public struct ProjectionColumn: Hashable, Sendable {
    public let name: String
    /// The PostgreSQL type, e.g. `text`, `bigint`, `timestamptz`.
    public let type: String
    /// A comment for readers of the table (finance reads these with SQL).
    public let meaning: String
    /// For a column a version added: what the versions before it meant by it, as SQL over their
    /// row `r` (an amount they computed as `price × quantity`, say), so that a dry run against one
    /// of them compares the column. Nil: not compared against a version without it.
    public let formerly: String?

    public init(_ name: String, _ type: String, _ meaning: String, formerly: String? = nil) {
        self.name = name
        self.type = type
        self.meaning = meaning
        self.formerly = formerly
    }
}

extension UserProjection {
    /// The versioned table's name, e.g. `ownership_v1`.
    public static var tableName: String { "\(name.rawValue)_v\(version)" }

    /// The user's rows as the store writes them, each value in the order of `columns`.
    public static func columnValues(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [[String?]] {
        rows(app: app, user: user, state: state, catalog: catalog).map(\.columnValues)
    }

    /// The user's rows, typed, so that a batch can compare them with the rows it wrote last time
    /// and write out (`columnValues(of:)`) only those it adds.
    public static func anyRows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [AnyProjectionRow] {
        rows(app: app, user: user, state: state, catalog: catalog).map(AnyProjectionRow.init)
    }

    /// Rows of this projection given by `anyRows`, as the store writes them. Another projection's
    /// rows here are a programming error, and stop the process.
    public static func columnValues(of rows: some Collection<AnyProjectionRow>) -> [[String?]] {
        rows.map { row in
            guard let typed = row.value.base as? Row else { preconditionFailure("a row of another projection given to \(name)") }
            return typed.columnValues
        }
    }

    /// None beyond (app, user_id) unless a projection names some.
    public static var indexes: [[String]] { [] }

}

/// A row of some projection, compared and hashed as that projection's row.
public struct AnyProjectionRow: Hashable, @unchecked Sendable {
    // Unchecked only because `AnyHashable` does not say it: the value is always a `ProjectionRow`,
    // which is Sendable (the one initializer takes nothing else).
    public let value: AnyHashable

    public init<Row: ProjectionRow>(_ row: Row) {
        value = AnyHashable(row)
    }
}

extension ProjectionRow {
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
        all.first { $0.name.rawValue == name }
    }
}
