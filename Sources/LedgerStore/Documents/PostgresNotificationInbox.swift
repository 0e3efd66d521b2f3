import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO

/// Finds whose an App Store notification is. A notification names no user: it belongs to the
/// user whose stream holds its transaction (or its original transaction), or failing that the
/// user the app's server bound its `appAccountToken` to. One that no user holds waits on the
/// app's `notifications/<bundle id>` stream, where a later post of its transaction finds it.
public struct PostgresNotificationInbox: NotificationInbox, Sendable {
    let client: DatabasePool
    let logger: Logger

    /// Where a notification was recorded before, if it was, and otherwise the user who first
    /// recorded any of these transactions: both from one statement over the deduplication keys.
    public func lookup(
        _ notificationKey: DeduplicationKey?, transactionIDs: [String], app bundleID: String, environment: StoreEnvironment
    ) async throws -> NotificationLookup {
        let claims = transactionIDs.flatMap { DeduplicationKey.claimsOf(transactionID: $0, app: bundleID, environment: environment) }.map(\.rawValue)
        let keys = (notificationKey.map { [$0.rawValue] } ?? []) + claims
        guard !keys.isEmpty else { return NotificationLookup() }
        let rows: QueryRows
        if client.logReach.prepares, let bucket = PreparedStatements.bucket(for: keys.count), let statement = Self.byKeys[bucket] {
            rows = try await client.query(prepared: statement, PreparedStatements.padded(keys, to: bucket), logger: logger)
        } else {
            rows = try await client.query(
                """
                SELECT dedup_key, event_id, stream_id, stream_version, "position" FROM ledger.events WHERE dedup_key = ANY(\(keys)) ORDER BY "position"
                """,
                logger: logger
            )
        }
        var holder: String?
        for try await (key, id, stream, version, position) in rows.decode((String, UUID, String, Int64, Int64).self) {
            if key == notificationKey?.rawValue {
                return NotificationLookup(earlier: .init(eventID: id, position: position, streamID: stream, streamVersion: version))
            }
            if holder == nil { holder = Self.user(stream, app: bundleID) }
        }
        return NotificationLookup(holder: holder)
    }

    /// The user the app's server bound this `appAccountToken` to: one lookup of the binding's key.
    public func holder(ofToken token: String, app bundleID: String) async throws -> String? {
        guard let key = try? DeduplicationKey.appAccountToken(app: bundleID, token: token) else { return nil }
        let rows = try await client.query("SELECT stream_id FROM ledger.events WHERE dedup_key = \(key.rawValue)", logger: logger)
        for try await stream in rows.decode(String.self) { return Self.user(stream, app: bundleID) }
        return nil
    }

    /// The notifications waiting on the app's notifications stream for any of these original
    /// transactions or tokens, in the order they came.
    public func waiting(
        app bundleID: String, environment: StoreEnvironment, originals: [String], tokens: [String]
    ) async throws -> [AppStoreNotificationReceived] {
        guard !originals.isEmpty || !tokens.isEmpty else { return [] }
        let stream = try StreamID.notifications(app: bundleID)
        // The stream's events under these keys (`ledger.notification_stream_keys`, written by
        // ledger.append for the notifications streams: migration 0027).
        let keys = originals.map { "original:\($0)" } + tokens.map { "token:\($0.lowercased())" }
        let rows: QueryRows
        if client.logReach.prepares, let bucket = PreparedStatements.bucket(for: keys.count), let statement = Self.waiting[bucket] {
            rows = try await client.query(
                prepared: statement, [stream.rawValue, environment.rawValue] + PreparedStatements.padded(keys, to: bucket), logger: logger
            )
        } else {
            rows = try await client.query(
                """
                SELECT e.data::text FROM ledger.events e
                WHERE e."position" IN (SELECT k."position" FROM ledger.notification_stream_keys k
                                       WHERE k.stream_id = \(stream.rawValue) AND k.key = ANY(\(keys)))
                  AND e.data ->> 'environment' = \(environment.rawValue)
                ORDER BY e."position"
                """,
                logger: logger
            )
        }
        var found: [AppStoreNotificationReceived] = []
        for try await data in rows.decode(String.self) {
            found.append(try LedgerJSON.decode(AppStoreNotificationReceived.self, from: data))
        }
        return found
    }

    /// The events recorded under any of the keys $1… (a bucket of them: see
    /// `PreparedStatements.keyBuckets`), in log order; prepared once the log is large enough
    /// (`LogReach`), as every notification looks its keys up.
    static let byKeys: [Int: PreparedStatements.Statement] = Dictionary(uniqueKeysWithValues: PreparedStatements.keyBuckets.map { bucket in
        (bucket, PreparedStatements.Statement(
            name: "ledger_events_by_keys_\(bucket)",
            sql: """
                SELECT dedup_key, event_id, stream_id, stream_version, "position" FROM ledger.events
                WHERE dedup_key = ANY(ARRAY[\(PreparedStatements.placeholders(from: 1, count: bucket))]) ORDER BY "position"
                """,
            arguments: bucket
        ))
    })

    /// The notifications of stream $1 for environment $2 filed under any of the keys $3… (a
    /// bucket of them), in log order; prepared once the log is large enough, as every post looks
    /// for them.
    static let waiting: [Int: PreparedStatements.Statement] = Dictionary(uniqueKeysWithValues: PreparedStatements.keyBuckets.map { bucket in
        (bucket, PreparedStatements.Statement(
            name: "ledger_waiting_notifications_\(bucket)",
            sql: """
                SELECT e.data::text FROM ledger.events e
                WHERE e."position" IN (SELECT k."position" FROM ledger.notification_stream_keys k
                                       WHERE k.stream_id = $1 AND k.key = ANY(ARRAY[\(PreparedStatements.placeholders(from: 3, count: bucket))]))
                  AND e.data ->> 'environment' = $2
                ORDER BY e."position"
                """,
            arguments: 2 + bucket
        ))
    })

    /// Notifications the app's notifications stream holds that no user took: waiting ones (neither
    /// copied to a user's stream nor expired) recorded before `recordedBefore`, oldest first; or
    /// expired ones, newest first.
    public func unclaimed(
        app bundleID: String, state: UnclaimedNotification.State, recordedBefore: Date?, limit: Int
    ) async throws -> [UnclaimedNotification] {
        let stream = try StreamID.notifications(app: bundleID).rawValue
        let type = AppStoreNotificationReceived.typeName.stored
        let prefix = "appstore/\(bundleID)/"
        let before = recordedBefore ?? Date(timeIntervalSince1970: 32_503_680_000)
        let rows: QueryRows
        switch state {
        case .waiting:
            rows = try await client.query("""
                SELECT n.data::text, n."position", n.recorded_at, NULL::timestamptz
                FROM ledger.events n
                WHERE n.stream_id = \(stream) AND n.event_type = \(type) AND n.recorded_at < \(before)
                  AND (jsonb_typeof(n.data -> 'transaction') = 'object' OR jsonb_typeof(n.data -> 'renewalInfo') = 'object')
                  AND NOT EXISTS (
                      SELECT 1 FROM ledger.events t
                      WHERE t.dedup_key IN (\(prefix) || (n.data ->> 'environment') || '/notification_applied/' || (n.data ->> 'notificationUUID'),
                                            \(prefix) || (n.data ->> 'environment') || '/notification_expired/' || (n.data ->> 'notificationUUID')))
                ORDER BY n."position" LIMIT \(limit)
                """, logger: logger)
        case .expired:
            rows = try await client.query("""
                SELECT n.data::text, n."position", n.recorded_at, x.recorded_at
                FROM ledger.events x
                JOIN ledger.events n ON n.stream_id = \(stream) AND n.event_type = \(type)
                                    AND n.data ->> 'notificationUUID' = x.data ->> 'notificationUUID'
                WHERE x.stream_id = \(stream) AND x.event_type = \(NotificationExpired.typeName.stored) AND n.recorded_at < \(before)
                ORDER BY x."position" DESC LIMIT \(limit)
                """, logger: logger)
        }
        var found: [UnclaimedNotification] = []
        for try await (data, position, recordedAt, expiredAt) in rows.decode((String, Int64, Date, Date?).self) {
            found.append(UnclaimedNotification(notification: try LedgerJSON.decode(AppStoreNotificationReceived.self, from: data),
                                               position: position, recordedAt: recordedAt, expiredAt: expiredAt))
        }
        return found
    }

    /// CONSUMPTION_REQUESTs on users' streams since `recordedAfter` with no answer's key recorded
    /// (`ledger.consumption_request_events`, written by ledger.append: migration 0027).
    public func unansweredConsumptionRequests(recordedAfter: Date, limit: Int) async throws -> [ConsumptionRequestNotice] {
        let rows = try await client.query("""
            SELECT n.stream_id, n.data::text, n."position"
            FROM ledger.consumption_request_events r
            JOIN ledger.events n ON n."position" = r."position"
            WHERE r.recorded_at > \(recordedAfter) AND r.stream_id LIKE 'user/%'
              AND NOT EXISTS (
                  SELECT 1 FROM ledger.events a
                  WHERE a.dedup_key = 'appstore/' || split_part(n.stream_id, '/', 2) || '/' || (n.data ->> 'environment')
                                      || '/\(unescaped: DeduplicationKey.AppStoreKind.consumptionAnswer.rawValue)/' || (n.data ->> 'notificationUUID'))
            ORDER BY n."position" LIMIT \(limit)
            """, logger: logger)
        var found: [ConsumptionRequestNotice] = []
        for try await (stream, data, position) in rows.decode((String, String, Int64).self) {
            guard case .user(let app, let user) = StreamID.kind(of: stream) else { continue }
            found.append(ConsumptionRequestNotice(app: app, user: user, notification: try LedgerJSON.decode(AppStoreNotificationReceived.self, from: data),
                                                  position: position))
        }
        return found
    }

    /// The user of a stream of the app, nil for any other stream.
    public static func user(_ stream: String, app bundleID: String) -> String? {
        guard case .user(let app, let user) = StreamID.kind(of: stream), app == bundleID else { return nil }
        return user
    }
}
