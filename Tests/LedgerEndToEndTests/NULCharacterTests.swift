import Foundation
import LedgerHTTP
import LedgerStore
import NIOHTTP1
import PostgresNIO
import Testing

/// Regressions the fuzzer found (`ledger-bench fuzz`): U+0000 in free text reached PostgreSQL,
/// which stores it neither in `text` nor in `jsonb` (SQLSTATE 22P05), and the request failed
/// with a 500 instead of saying what was wrong.
@Suite struct NULCharacterTests {
    /// The log's head and the receipts kept: nothing recorded means neither moves.
    static func recorded(_ api: APIHarness) async throws -> [Int64] {
        let rows = try await api.client.query(
            "SELECT coalesce((SELECT max(position) FROM ledger.events), 0), (SELECT count(*) FROM ledger.receipts), (SELECT count(*) FROM ledger.receipt_answers)"
        )
        for try await (head, receipts, answers) in rows.decode((Int64, Int64, Int64).self) { return [head, receipts, answers] }
        return []
    }

    @Test func aNULCharacterInFreeTextIsRefusedNamingTheFieldAndRecordsNothing() async throws {
        try await APIHarness.run { api in
            let app = APIHarness.app
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
            let before = try await Self.recorded(api)

            let revoked = try await api.send(.POST, "/v1/apps/\(app)/transactions/\(bought.transactionId)/revoke", key: api.allKey,
                                             json: ["reason": "fra\u{0}ud"])
            #expect(revoked.status == 400 && revoked.errorCode == "invalid_request", "\(revoked.status) \(revoked.text)")
            #expect(revoked.errorMessage?.contains("reason must not contain the NUL character") == true, "\(revoked.text)")

            let failed = try await api.send(.POST, "/v1/apps/\(app)/failures", key: api.allKey, json: [
                "userId": "alice", "deviceId": "phone", "productId": "coins.100", "errorCode": "SKError\u{0}", "cancelled": true,
            ])
            #expect(failed.status == 400 && failed.errorMessage?.contains("errorCode") == true, "\(failed.status) \(failed.text)")

            // The simulator, like a lenient base64 reader, skips the NUL and finds the receipt authentic.
            let fresh = try await api.buy("alice", "coins.100")
            let receipt = String(fresh.receipt.prefix(8)) + "\u{0}" + String(fresh.receipt.dropFirst(8))
            let posted = try await api.ingest("alice", device: "phone", receipt: receipt)
            #expect(posted.status == 400 && posted.errorMessage?.contains("receiptData") == true, "\(posted.status) \(posted.text)")

            #expect(try await Self.recorded(api) == before, "nothing recorded, no receipt or answer kept")
        }
    }
}
