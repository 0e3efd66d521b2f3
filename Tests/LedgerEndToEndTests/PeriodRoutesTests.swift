import Foundation
import LedgerApplication
import LedgerDomain
import LedgerDomainTesting
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// Finance closes a month over HTTP, reads its frozen figures and the adjustments learned since,
/// and reopens it; each refusal says what was wrong.
@Suite struct PeriodRoutesTests {
    static let app = APIHarness.app

    static func signer() throws -> AnchorSigningKey {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("periods-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try AnchorSigningKey.create(at: directory.appendingPathComponent("anchor.key").path)
    }

    static func code(_ answer: APIHarness.Answer) -> String? {
        (answer.json["error"] as? [String: Any])?["code"] as? String
    }

    /// Two October purchases of 2 coins at 0.99 USD (ann's t1 on the 3rd, bob's t2 on the 20th), recorded as verified receipts.
    static func seedOctober(_ api: APIHarness) async throws -> PostgresLedger {
        try await api.defineProduct("coins", type: "consumable")
        let ledger = PostgresLedger(client: api.client, logger: TestDatabase.logger)
        for (user, id, time) in [("ann", "t1", "2026-10-03T10:00:00Z"), ("bob", "t2", "2026-10-20T10:00:00Z")] {
            let bought = TestTransaction(id, "coins", quantity: 2, purchased: LedgerJSON.parseTimestamp(time)!)
            _ = try await ledger.handler.execute(app: app, user: user) { state, _ in
                (try TestReceipts.observe([bought], app: app, price: "0.99", currency: "USD", on: state).events, ())
            }
        }
        return ledger
    }

    static func head(_ api: APIHarness) async throws -> Int {
        var head = 0
        for try await value in try await api.client.query("SELECT coalesce(max(\"position\"), 0)::int FROM ledger.events").decode(Int.self) { head = value }
        return head
    }

    @Test func financeClosesAMonthReadsItsFiguresAndAdjustmentsAndReopensIt() async throws {
        try await APIHarness.run(periodSigner: try Self.signer()) { api in
            let ledger = try await Self.seedOctober(api)
            let finance = api.keys["finance"]
            let closed = try await api.send(.POST, "/v1/audit/periods/2026-10/close?minPosition=\(try await Self.head(api))", key: finance)
            #expect(closed.status == 201, "\(closed.text)")
            #expect(closed.json["state"] as? String == "closed" && closed.json["signatureValid"] as? Bool == true)
            let figures = closed.json["figures"] as? [[String: Any]] ?? []
            #expect(figures.count == 1 && figures.first?["gross"] as? String == "3.96" && figures.first?["units"] as? Int == 4, "\(figures)")

            let again = try await api.send(.POST, "/v1/audit/periods/2026-10/close", key: finance)
            #expect(again.status == 409 && Self.code(again) == "period_closed", "\(again.text)")
            let early = try await api.send(.POST, "/v1/audit/periods/2099-01/close", key: finance)
            #expect(early.status == 409 && Self.code(early) == "period_not_ended", "\(early.text)")
            let malformed = try await api.send(.POST, "/v1/audit/periods/October/close", key: finance)
            #expect(malformed.status == 400 && malformed.text.contains("yyyy-MM"), "\(malformed.text)")
            #expect(try await api.send(.GET, "/v1/audit/periods/2026-09", key: finance).status == 404)
            #expect(try await api.send(.GET, "/v1/audit/periods", key: api.keys["read"]).status == 403)

            // Apple refunds ann's coins, dated in October, after the close.
            _ = try await ledger.handler.execute(app: Self.app, user: "ann") { state, _ in
                (try UserDecisions.revoke(transactionId: "t1", revokedAt: LedgerJSON.parseTimestamp("2026-10-25T00:00:00Z")!, reason: "refund", on: state), ())
            }
            let head = try await Self.head(api)
            let marked = try await api.send(.GET, "/v1/audit/summary?from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z&minPosition=\(head)", key: finance)
            #expect((marked.json["closedPeriods"] as? [[String: Any]])?.map { $0["period"] as? String } == ["2026-10"], "\(marked.text)")
            let period = try await api.send(.GET, "/v1/audit/periods/2026-10", key: finance)
            #expect((period.json["figures"] as? [[String: Any]])?.first?["net"] as? String == "3.96", "the closed figures do not move")
            let adjustments = try await api.send(.GET, "/v1/audit/adjustments?period=2026-10&minPosition=\(head)", key: finance)
            let listed = adjustments.json["adjustments"] as? [[String: Any]] ?? []
            #expect(listed.count == 1 && listed.first?["netChange"] as? String == "-1.98" && listed.first?["kind"] as? String == "added", "\(adjustments.text)")
            #expect((listed.first?["cause"] as? [String: Any])?["type"] as? String == "PurchaseRevoked.v1")
            let csv = try await api.send(.GET, "/v1/audit/adjustments?period=2026-10", key: finance, headers: [("Accept", "text/csv")])
            #expect(csv.text.hasPrefix(AdjustmentCSV.header) && csv.text.contains(",added,") && csv.text.contains(",-1.98,fact,"), "\(csv.text)")

            let reopened = try await api.send(.POST, "/v1/audit/periods/2026-10/reopen", key: finance, json: ["reason": "ann's refund is October's"])
            #expect(reopened.status == 200 && reopened.json["state"] as? String == "reopened", "\(reopened.text)")
            let twice = try await api.send(.POST, "/v1/audit/periods/2026-10/reopen", key: finance, json: ["reason": "again"])
            #expect(twice.status == 409 && Self.code(twice) == "period_not_closed")
            // The summary of October names the closed month and where its frozen figures are.
            let summary = try await api.send(.GET, "/v1/audit/summary?from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z", key: finance)
            #expect((summary.json["closedPeriods"] as? [[String: Any]])?.isEmpty == true, "reopened: no longer closed")
            // Metrics of the month: the same API, its contract checked.
            let metrics = try await api.send(.GET, "/v1/audit/metrics?from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z", key: finance)
            #expect(metrics.status == 200 && (metrics.json["refunds"] as? [[String: Any]])?.first?["refunds"] as? Int == 1, "\(metrics.text)")
            let badInterval = try await api.send(.GET, "/v1/audit/metrics?from=2026-10-01T00:00:00Z&to=2026-11-01T00:00:00Z&interval=week", key: finance)
            #expect(badInterval.status == 400 && badInterval.text.contains("month or day"))
            let list = try await api.send(.GET, "/v1/audit/periods", key: finance)
            #expect((list.json["periods"] as? [[String: Any]])?.map { $0["state"] as? String } == ["reopened"])
        }
    }

    @Test func withoutAnAnchorKeyTheServerRefusesToCloseAndSaysHow() async throws {
        try await APIHarness.run { api in
            let refused = try await api.send(.POST, "/v1/audit/periods/2026-10/close", key: api.keys["finance"])
            #expect(refused.status == 409 && Self.code(refused) == "no_signing_key" && refused.text.contains("LEDGER_ANCHOR_KEY_FILE"),
                    "\(refused.text)")
        }
    }
}
