import Foundation
@testable import LedgerBenchmarks
import LedgerTesting
import NIOHTTP1
import Testing

/// Regressions the fuzzer found through the ledger whose App Store answers what it is told.
@Suite struct LedgerFuzzWorldTests {
    /// A simulator answer with `edit` applied to its first in-app transaction, and with
    /// `renewalInfo` as its `pending_renewal_info` when given.
    static func answer(
        _ world: LedgerFuzzWorld, renewalInfo: [[String: String]]? = nil, _ edit: (inout [String: Any]) -> Void
    ) throws -> Data {
        let first = try #require(world.simulatorAnswers.first)
        var root = try #require(try JSONSerialization.jsonObject(with: first) as? [String: Any])
        var receipt = try #require(root["receipt"] as? [String: Any])
        var inApp = try #require(receipt["in_app"] as? [[String: Any]])
        edit(&inApp[0])
        receipt["in_app"] = inApp
        root["receipt"] = receipt
        if let renewalInfo { root["pending_renewal_info"] = renewalInfo }
        return try JSONSerialization.data(withJSONObject: root)
    }

    static func post(_ world: LedgerFuzzWorld, user: String = "zoe", receipt: String) async throws -> LedgerFuzzWorld.Answer {
        try await LedgerFuzzWorld.exchange(
            world.http, .POST, world.scriptedLedgerBase + "/v1/apps/\(LedgerFuzzWorld.app)/receipts",
            headers: [("Authorization", "Bearer \(world.key)"), ("Content-Type", "application/json")],
            body: try JSONSerialization.data(withJSONObject: ["userId": user, "deviceId": "phone", "receiptData": Data(receipt.utf8).base64EncodedString()])
        )
    }

    /// An answer whose transaction id cannot name a fact (a '/' in it) was refused with a 400 only
    /// after the receipt and the answer were kept; one with U+0000 in a field failed with a 500,
    /// also after keeping them. Both are refused now before anything is kept.
    @Test func anAnswerTheLogCannotHoldIsRefusedBeforeTheReceiptOrTheAnswerIsKept() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await LedgerFuzzWorld.run(client: client, settings: settings, logger: quietLogger) { world in
                let before = try await world.snapshot()

                await world.scripted.script(try Self.answer(world) { $0["transaction_id"] = "2026-11-22 23:04:35 Etc/GMT" })
                let slashed = try await Self.post(world, receipt: "slash")
                #expect(slashed.status == 400, "\(slashed.status) \(slashed.text)")
                #expect(slashed.text.contains("transaction_id the ledger cannot record"), "\(slashed.text)")

                await world.scripted.script(try Self.answer(world) { $0["web_order_line_item_id"] = "1000\u{0}" })
                let nul = try await Self.post(world, receipt: "nul")
                #expect(nul.status == 400, "\(nul.status) \(nul.text)")
                #expect(nul.text.contains("NUL character"), "\(nul.text)")

                #expect(try await world.snapshot() == before, "no event, receipt or answer was recorded")

                await world.scripted.script(try Self.answer(world) { _ in })
                #expect(try await Self.post(world, receipt: "fine").status == 200, "the same answer unbroken is recorded")
            }
        }
    }

    /// Case 89,129 of seed 13: a receipt whose `pending_renewal_info` named an original transaction
    /// nobody holds, with the same fields another user's post had recorded, appended its post and
    /// its new transaction and only then answered 409 `owned_by_another_user` (the renewal-info
    /// fact's key was in the other user's stream). Now the post is refused before anything is
    /// recorded, and neither the receipt nor the answer is kept.
    @Test func aReceiptWhoseRenewalInfoAnotherUserRecordedIsRefusedRecordingNothing() async throws {
        try await TestDatabase.withDatabase { client, settings in
            try await LedgerFuzzWorld.run(client: client, settings: settings, logger: quietLogger) { world in
                let renewal = ["original_transaction_id": "4100000000000000", "product_id": "monthly",
                               "auto_renew_product_id": "monthly", "auto_renew_status": "1"]
                await world.scripted.script(try Self.answer(world, renewalInfo: [renewal]) {
                    $0["transaction_id"] = "4100000000000001"
                    $0["original_transaction_id"] = "4100000000000001"
                })
                let first = try await Self.post(world, user: "zoe", receipt: "zoe's")
                #expect(first.status == 200, "\(first.status) \(first.text)")
                let before = try await world.snapshot()
                let events = try await world.eventCount()

                // Another user's receipt: a transaction nobody holds, and the same renewal info.
                await world.scripted.script(try Self.answer(world, renewalInfo: [renewal]) {
                    $0["transaction_id"] = "4100000000000002"
                    $0["original_transaction_id"] = "4100000000000002"
                })
                let refused = try await Self.post(world, user: "yan", receipt: "yan's")
                #expect(refused.status == 409, "\(refused.status) \(refused.text)")
                #expect(refused.text.contains("owned_by_another_user"), "\(refused.text)")
                #expect(try await world.eventCount() == events, "no event was appended")
                #expect(try await world.snapshot() == before, "no event, receipt or answer was recorded")
            }
        }
    }
}
