import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import PostgresNIO

/// A user's rows in the projections, for the read routes.
public struct UserReadModels: UserReads, Sendable {
    let client: DatabasePool
    /// The registry as announced to this server, when a `ChangeFeed` keeps it; nil asks the database.
    let board: ProjectionBoard?
    /// Users' entitlement rows kept in memory, when a `ChangeFeed` keeps them true; nil reads the database every time.
    let cache: EntitlementRowCache?
    let logger: Logger

    public init(client: DatabasePool, board: ProjectionBoard? = nil, cache: EntitlementRowCache? = nil, logger: Logger) {
        self.client = client
        self.board = board
        self.cache = cache
        self.logger = logger
    }

    /// The position every named projection has reached: the smallest of their live checkpoints.
    /// Throws `ReadError` (`projections_behind`) when one of them has no live version: a new
    /// version still catching up with the log, or one that failed. Reads are then refused rather
    /// than answered from a table that does not reflect the log.
    public func checkpoint(of projections: [ProjectionName]) async throws -> Int64 {
        try await readiness(of: projections).checkpoint()
    }

    /// Waits until every named projection reflects the log up to `position`, at most `timeout`.
    /// Returns the checkpoint reached; throws `ReadError.projectionsBehind` with the checkpoint when time runs out,
    /// and `projectionsNotReady` when one of them has no live version by then (at once when one has failed:
    /// waiting does not mend it). With a board the wait looks at memory, which announcements move;
    /// without one it polls the registry.
    public func waitForProjections(_ projections: [ProjectionName], toReach position: Int64, timeout: Duration) async throws -> Int64 {
        let deadline = ContinuousClock.now + timeout
        var delay = Duration.milliseconds(board?.isListening == true ? 1 : 5)
        while true {
            let readiness = try await readiness(of: projections)
            if let reached = readiness.reached, reached >= position { return reached }
            guard readiness.failed.isEmpty, ContinuousClock.now + delay < deadline else {
                guard let reached = readiness.reached else { return try readiness.checkpoint() }
                throw ReadError.projectionsBehind(requested: position, reached: reached)
            }
            try await Task.sleep(for: delay)
            if board?.isListening != true { delay = min(delay * 2, .milliseconds(100)) }
        }
    }

    /// Where each named projection stands: from memory while the board follows the registry,
    /// else from `ledger.projections` (one small query).
    func readiness(of projections: [ProjectionName]) async throws -> ProjectionReadiness {
        if let known = board?.readiness(of: projections) { return known }
        let rows = try await client.query("""
            SELECT name, version, status, position, error_position FROM ledger.projections
            WHERE name = ANY(\(projections)) AND status <> \(ProjectionState.retired)
            """, logger: logger)
        var registry: [RegistryRow] = []
        for try await (name, version, status, position, errorPosition) in rows.decode((String, Int, String, Int64, Int64?).self) {
            registry.append(RegistryRow(name: ProjectionName(rawValue: name), version: version, state: ProjectionState(rawValue: status),
                                        position: position, errorPosition: errorPosition, change: 0))
        }
        return ProjectionReadiness(of: projections, rows: registry)
    }

    /// The statement `entitlementRows` runs: $1 the app, $2 the user, $3 the user's stream. One
    /// row shape for the three tables (which table, the sort keys, then the values), and a last
    /// row saying whether the user has any event at all: whether the stream has its first version
    /// (every stream starts at 1), a lookup of one row in `events_stream_version_key` whatever
    /// plan PostgreSQL keeps. Asked only whether any row has the stream, the plan kept for every
    /// argument of the prepared statement scanned the log when it held a few long streams (it
    /// expects a quarter of the rows to match, so the first match early): 17 ms for a user with
    /// no event on a log of 30,000. Public for benchmarks that compare it.
    public static let entitlementsStatement = """
        SELECT 0 AS part, owned_since AS sort_time, product_id AS sort_key, product_id, product_type AS kind,
               original_transaction_id, NULL::text AS transaction_id, NULL::text AS subscription_group, expires_at AS end_time,
               NULL::bigint AS purchased, NULL::bigint AS consumed, NULL::bigint AS balance, NULL::boolean AS flag
          FROM ledger.ownership WHERE app = $1 AND user_id = $2
        UNION ALL
        SELECT 1, period_start, transaction_id, product_id, kind, original_transaction_id, transaction_id, subscription_group, period_end,
               NULL, NULL, NULL, NULL
          FROM ledger.subscription_periods WHERE app = $1 AND user_id = $2
        UNION ALL
        SELECT 2, NULL, product_id, product_id, NULL, NULL, NULL, NULL, NULL, purchased, consumed, balance, overdrawn
          FROM ledger.consumable_balances WHERE app = $1 AND user_id = $2
        UNION ALL
        SELECT 3, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
               EXISTS (SELECT 1 FROM ledger.events WHERE stream_id = $3 AND stream_version = 1)
        ORDER BY part, sort_time, sort_key
        """

    static let entitlements = PreparedStatements.Statement(name: "ledger_entitlements", sql: entitlementsStatement, arguments: 3)

    /// Text values as a statement's $1, $2, ….
    static func bindings(_ values: [String]) -> PostgresBindings {
        var bindings = PostgresBindings(capacity: values.count)
        for value in values { bindings.append(value) }
        return bindings
    }

    /// A user's entitlement rows as of the projections' checkpoint `position` (or later): from
    /// the cache when it holds them true there, else from the database (kept for the next read).
    public func entitlementRows(app: String, user: String, at position: Int64) async throws -> EntitlementRows {
        let stream = try StreamID.user(app: app, user: user).rawValue
        // The projections' checkpoint is a position the log holds.
        client.logReach.saw(position)
        guard let cache else { return try await entitlementRows(stream: stream, app: app, user: user) }
        switch cache.lookup(stream, at: position) {
        case .hit(let rows):
            return rows
        case .miss(let epoch):
            let rows = try await entitlementRows(stream: stream, app: app, user: user)
            // An unknown user is not kept: anyone can ask for any name.
            if let epoch, rows.userExists { cache.keep(rows, for: stream, epoch: epoch) }
            return rows
        }
    }

    /// A user's entitlement rows from the database.
    private func entitlementRows(stream: String, app: String, user: String) async throws -> EntitlementRows {
        // Prepared, PostgreSQL takes longer to plan this statement than to run it; but not before
        // the log is large enough for the plan it keeps to read the tables by index (`LogReach`).
        let rows = if client.logReach.prepares {
            try await client.query(prepared: Self.entitlements, [app, user, stream], logger: logger)
        } else {
            try await client.query(PostgresQuery(unsafeSQL: Self.entitlementsStatement, binds: Self.bindings([app, user, stream])), logger: logger)
        }
        var result = EntitlementRows()
        // Each part decodes only its own columns (see the statement's row shape).
        let context = PostgresDecodingContext.default
        for row in rows.collect() {
            let columns = row.makeRandomAccess()
            func text(_ index: Int) throws -> String { try columns[index].decode(String.self, context: context) }
            func time(_ index: Int) throws -> Date { try columns[index].decode(Date.self, context: context) }
            func number(_ index: Int) throws -> Int64 { try columns[index].decode(Int64.self, context: context) }
            switch try columns[0].decode(Int32.self, context: context) {
            case 0:
                result.owned.append(EntitlementRows.Owned(productId: try text(3), productType: ProductType(rawValue: try text(4)) ?? .unknown,
                                          originalTransactionId: try text(5), ownedSince: try time(1),
                                          expiresAt: try columns[8].decode(Date?.self, context: context)))
            case 1:
                let kind = try text(4)
                guard let subscriptionKind = SubscriptionKind(rawValue: kind) else {
                    throw StoreError.integrity("ledger.subscription_periods holds kind '\(kind)', which this version does not know")
                }
                result.periods.append(EntitlementRows.Period(transactionId: try text(6), originalTransactionId: try text(5), productId: try text(3),
                                             group: try text(7), kind: subscriptionKind, start: try time(1), end: try time(8)))
            case 2:
                result.balances.append(EntitlementRows.Balance(productId: try text(3), purchased: try number(9), consumed: try number(10),
                                               balance: try number(11), overdrawn: try columns[12].decode(Bool.self, context: context)))
            default:
                result.userExists = try columns[12].decode(Bool.self, context: context)
            }
        }
        return result
    }
}
