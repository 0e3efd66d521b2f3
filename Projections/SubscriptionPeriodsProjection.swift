import Foundation
import LedgerDomain

/// `ledger.subscription_periods`: every paid subscription period, `[period_start, period_end)`.
///
/// Non-renewing: stacked per subscription group from the later of the purchase date and the end
/// of the group's previous period, in the catalog's duration; a revoked purchase is removed and the
/// later periods move up. Auto-renewable: each non-revoked transaction's `[purchase, expires)`.
/// Version 2 computes each end of a chain of stacked periods from the chain's start (start + n ×
/// duration); version 1 added each duration to the previous end, and month ends drifted. It also
/// ends an auto-renewable period where the App Store reported the subscription cancelled.
public enum SubscriptionPeriodsProjection: UserProjection {
    public static let name = ProjectionName.subscriptionPeriods
    /// Version 3 followed `TransactionClassifier.version` 2 (rows from the classifier over recorded
    /// facts). Version 4: an auto-renewable period's group is the one the catalog gave when the
    /// transaction was recorded, not the current one. Version 5: a subscription in a billing grace
    /// period (its latest renewal info says billing is retried, with a grace period) keeps its latest
    /// period running until the grace period ends. Version 6: in a chain of non-renewing periods
    /// of mixed units (a week, then a month), each run of one unit starts where the previous
    /// period ends (version 5 added all months, then all days, to the chain's start).
    public static let version = 6

    public static let columns: [ProjectionColumn] = [
        ProjectionColumn("transaction_id", "text NOT NULL", "the transaction that paid for the period"),
        ProjectionColumn("original_transaction_id", "text NOT NULL", "its original transaction"),
        ProjectionColumn("product_id", "text NOT NULL", "the subscription product"),
        ProjectionColumn("subscription_group", "text NOT NULL", "non-renewing periods of one group stack"),
        ProjectionColumn("kind", "text NOT NULL", "non_renewing or auto_renewable"),
        ProjectionColumn("period_start", "timestamptz NOT NULL", "start, inclusive"),
        ProjectionColumn("period_end", "timestamptz NOT NULL", "end, exclusive"),
    ]
    public static let keyColumns = ["transaction_id"]

    public struct Row: ProjectionRow {
        public let period: SubscriptionPeriod
        public let originalTransactionId: String

        public var columnValues: [String?] {
            [period.transactionId, originalTransactionId, period.productId, period.group, period.kind.rawValue,
             Self.text(period.start), Self.text(period.end)]
        }
    }

    public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
        state.subscriptionPeriods(catalog: catalog).map { period in
            Row(period: period, originalTransactionId: state.transactions[period.transactionId]?.originalTransactionId ?? period.transactionId)
        }
    }
}
