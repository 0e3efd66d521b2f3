import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import LedgerTesting
import NIOHTTP1
import Testing

/// Reads and `/health` over HTTP while no version of a projection is live: a ledger whose
/// projections are still catching up with a log that has history, and one whose projection failed.
@Suite struct ProjectionReadinessTests {
    @Test func readsAnswer503WhileNoVersionIsLiveAndHealthSaysWhichAndWhy() async throws {
        try await APIHarness.run(readWait: .milliseconds(300), runProjections: false) { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100", quantity: 3)
            let ingested = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(ingested.status == 200, "\(ingested.text)")
            let position = try #require(ingested.json["position"] as? Int)
            let entitlements = "/v1/apps/\(APIHarness.app)/users/alice/entitlements"

            // The runner sets up its projections on a log that already has alice's purchase: until
            // they have applied it, alice is not answered with nothing.
            let runner = ProjectionRunner(client: api.client, listenConfiguration: nil, pollInterval: .milliseconds(50), logger: APIHarness.logger)
            try await runner.prepare()
            for route in [entitlements, entitlements + "?minPosition=\(position)", "/v1/audit/events?environment=sandbox"] {
                let early = try await api.send(.GET, route, key: api.allKey)
                #expect(early.status == 503 && early.errorCode == "projections_behind", "\(route): \(early.status) \(early.text)")
                #expect((early.json["error"] as? [String: Any])?["retryable"] as? Bool == true)
                #expect(early.errorMessage?.contains("still being built") == true, "\(early.text)")
            }
            let building = try await api.send(.GET, "/health", key: nil)
            let statuses = (building.json["projections"] as? [[String: Any]] ?? []).compactMap { $0["status"] as? String }
            #expect(statuses.count == 6 && Set(statuses) == ["building"], "\(building.text)")

            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { try await runner.run() }
                #expect(try await eventually(timeout: .seconds(120)) {
                    try await api.send(.GET, entitlements + "?minPosition=\(position)", key: api.allKey).status == 200
                })
                let answered = try await api.send(.GET, entitlements + "?minPosition=\(position)", key: api.allKey)
                #expect(answered.text.contains("coins.100"), "\(answered.text)")
                let healthy = try await api.send(.GET, "/health", key: nil)
                #expect(healthy.status == 200 && healthy.json["status"] as? String == "ok", "\(healthy.text)")

                // An event this version cannot read: every projection stops at it.
                let odd = try await PostgresEventStore(client: api.client, logger: APIHarness.logger).append(
                    [try NewEvent(type: EventTypeName("GiftCardRedeemed", version: 1), data: #"{"amount":"10"}"#)],
                    to: StreamID.user(app: APIHarness.app, user: "alice"), expecting: .any
                )
                #expect(try await eventually(timeout: .seconds(120)) {
                    let health = try await api.send(.GET, "/health", key: nil)
                    return (health.json["problems"] as? [String])?.count == 6
                })
                let stopped = try await api.send(.GET, entitlements, key: api.allKey)
                #expect(stopped.status == 503 && stopped.errorCode == "projections_behind", "\(stopped.text)")
                #expect(stopped.errorMessage?.contains(
                    "ownership (at position \(odd.position)), subscription_periods (at position \(odd.position)), consumable_balances (at position \(odd.position)) stopped on an error"
                ) == true, "\(stopped.text)")
                let degraded = try await api.send(.GET, "/health", key: nil)
                #expect(degraded.status == 503)
                let problems = degraded.json["problems"] as? [String] ?? []
                #expect(problems.count == 6, "\(degraded.text)")
                #expect(problems.contains { $0.hasPrefix("projection ownership v") && $0.contains("failed at position \(odd.position)") && $0.contains("GiftCardRedeemed.v1") },
                        "\(problems)")
                group.cancelAll()
            }
        }
    }
}
