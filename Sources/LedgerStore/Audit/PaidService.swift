import LedgerApplication

/// The SQL that tells, for each auto-renewable payment of the audit trail, whether it comes after
/// the subscriber's first year of paid service, when Apple's commission drops to 15 %.
///
/// Days of paid service are the lengths of the subscription's earlier paid periods (priced, not a
/// free trial, not refunded); a lapse of more than 60 days between the end of one paid period and
/// the next payment starts the count again, as Apple counts. A subscription is one user's
/// `original_transaction_id`, which upgrades and crossgrades within the group keep.
enum PaidService {
    static let defaultTimeZone = ReconcileSalesReports.defaultTimeZone

    /// The app's reporting time zone as SQL over a bound bundle id `$app`, given as `app`.
    static func reportingTimeZone(app column: String) -> String {
        "coalesce((SELECT reporting_time_zone FROM ledger.apps WHERE bundle_id = \(column)), '\(defaultTimeZone)')"
    }

    /// The columns a `subscription_rows` CTE selects from `ledger.audit_trail` (for one app).
    static let subscriptionColumns = """
        user_id, original_transaction_id, transaction_id, purchase_date, expires_date, position,
        (amount > 0 AND offer <> 'free_trial' AND NOT revoked AND expires_date IS NOT NULL) AS paid
        """

    /// The rows a `subscription_rows` CTE keeps: the app's auto-renewable payments.
    static let subscriptionConditions = "product_type = 'auto_renewable' AND event <> 'refund'"

    /// A CTE `paid (user_id, transaction_id, past_a_year)` over a CTE `subscription_rows`.
    static let paidCTE = """
        paid AS (
            SELECT user_id, transaction_id,
                   coalesce(sum(days) FILTER (WHERE paid) OVER run_before, 0) >= 365 AS past_a_year
            FROM (
                SELECT g.*, count(*) FILTER (WHERE gap > interval '60 days')
                           OVER (PARTITION BY user_id, original_transaction_id ORDER BY purchase_date, position) AS run
                FROM (
                    SELECT s.*, extract(epoch FROM expires_date - purchase_date) / 86400 AS days,
                           purchase_date - max(expires_date) FILTER (WHERE paid)
                               OVER (PARTITION BY user_id, original_transaction_id ORDER BY purchase_date, position
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS gap
                    FROM subscription_rows s
                ) g
            ) t
            WINDOW run_before AS (PARTITION BY user_id, original_transaction_id, run ORDER BY purchase_date, position
                                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
        )
        """
}
