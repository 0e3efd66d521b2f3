import Foundation
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// A statement the database gives up on in time (a lock held elsewhere past `lock_timeout`) is
/// answered 503 `database_busy`, retryable, with nothing recorded: not a 500.
@Suite struct DatabaseBusyTests {
    @Test func aCriticalSectionHeldElsewhereAnswers503DatabaseBusyAndRecordsNothing() async throws {
        try await APIHarness.run(sessionSettings: ["lock_timeout": "300ms"]) { api in
            let before = try await api.eventCount()
            try await TestDatabase.withOwnerConnection(of: api.client) { owner in
                // The append's critical section, held by another of the ledger's roles.
                _ = try await owner.query("SELECT pg_advisory_lock(7400118)", logger: APIHarness.logger).collect()
                let answer = try await api.send(.PUT, "/v1/apps/\(APIHarness.app)/products/gems", key: api.keys["admin"],
                                                json: ["type": "consumable", "prices": ["USD": "1.99"]])
                #expect(answer.status == 503 && answer.errorCode == "database_busy", "\(answer.text)")
                #expect((answer.json["error"] as? [String: Any])?["retryable"] as? Bool == true, "\(answer.text)")
                #expect(answer.headers.first(name: "Retry-After") != nil)
                _ = try await owner.query("SELECT pg_advisory_unlock(7400118)", logger: APIHarness.logger).collect()
            }
            #expect(try await api.eventCount() == before, "nothing recorded")
            let again = try await api.send(.PUT, "/v1/apps/\(APIHarness.app)/products/gems", key: api.keys["admin"],
                                           json: ["type": "consumable", "prices": ["USD": "1.99"]])
            #expect(again.status == 200, "sent again, it is recorded: \(again.text)")
        }
    }
}
