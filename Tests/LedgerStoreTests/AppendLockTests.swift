import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
@testable import LedgerStore
import PostgresNIO
import Testing

/// `ledger.append`'s critical section takes a session-level lock: a cancelled append must never
/// leave it held, or every later append of the database waits for ever.
@Suite("The append lock: a cancelled append leaves nothing held")
struct AppendLockTests {
    static func event(_ number: Int) throws -> NewEvent {
        try NewEvent(type: EventTypeName("Probe", version: 1), data: #"{"n":\#(number)}"#)
    }

    /// Whether any session holds the critical section's lock.
    static func lockHolders(_ connection: PostgresConnection) async throws -> Int {
        let rows = try await connection.query(
            """
            SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND classid = 0 AND objid = 7400118 AND objsubid = 1
              AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
            """,
            logger: TestDatabase.logger
        ).collect()
        return try rows.first?.decode(Int.self) ?? 0
    }

    @Test("an append cancelled while it waits for the critical section holds nothing afterwards; the next appends go through")
    func cancelledWhileWaiting() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            _ = try await store.append([try Self.event(0)], to: StreamID("probe/a"), expecting: .any)
            try await TestDatabase.withConnection(settings) { holder in
                // Another session sits in the critical section.
                try await holder.query("SELECT pg_advisory_lock(7400118)", logger: TestDatabase.logger)
                let waiting = Task { try await store.append([try Self.event(1)], to: StreamID("probe/b"), expecting: .any) }
                let blocked = try await eventually {
                    let rows = try await holder.query(
                        """
                        SELECT count(*) FROM pg_stat_activity
                        WHERE datname = current_database() AND wait_event_type = 'Lock' AND wait_event = 'advisory' AND query LIKE '%ledger.append%'
                        """, logger: TestDatabase.logger
                    ).collect()
                    return try rows.first?.decode(Int.self) == 1
                }
                #expect(blocked, "the append waits for the critical section")
                try await holder.query(
                    """
                    SELECT pg_cancel_backend(pid) FROM pg_stat_activity
                    WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%ledger.append%'
                    """, logger: TestDatabase.logger
                )
                await #expect(throws: (any Error).self) { try await waiting.value }
                try await holder.query("SELECT pg_advisory_unlock(7400118)", logger: TestDatabase.logger)
                #expect(try await Self.lockHolders(holder) == 0)

                // Every connection of the pool appends again, at once: none waits on a lock left behind.
                let results = try await withThrowingTaskGroup(of: AppendResult.self) { group in
                    for number in 2..<22 {
                        group.addTask { try await store.append([try Self.event(number)], to: StreamID("probe/c\(number)"), expecting: .any) }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(results.count == 20)
                #expect(try await Self.lockHolders(holder) == 0)
            }
        }
    }
}
