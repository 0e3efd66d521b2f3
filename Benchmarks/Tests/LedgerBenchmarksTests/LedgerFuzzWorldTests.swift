import Foundation
@testable import LedgerBenchmarks
import LedgerTesting
import NIOHTTP1
import Testing

/// Regressions the fuzzer found through the ledger whose App Store answers what it is told.
@Suite struct LedgerFuzzWorldTests {
    /// A simulator answer with `edit` applied to its first in-app transaction.
    static func answer(_ world: LedgerFuzzWorld, _ edit: (inout [String: Any]) -> Void) throws -> Data {
        let first = try #require(world.simulatorAnswers.first)
        var root = try #require(try JSONSerialization.jsonObject(with: first) as? [String: Any])
        var receipt = try #require(root["receipt"] as? [String: Any])
        var inApp = try #require(receipt["in_app"] as? [[String: Any]])
        edit(&inApp[0])
        receipt["in_app"] = inApp
        root["receipt"] = receipt
        return try JSONSerialization.data(withJSONObject: root)
    }

    static func post(_ world: LedgerFuzzWorld, receipt: String) async throws -> LedgerFuzzWorld.Answer {
        try await LedgerFuzzWorld.exchange(
            world.http, .POST, world.scriptedLedgerBase + "/v1/apps/\(LedgerFuzzWorld.app)/receipts",
            headers: [("Authorization", "Bearer \(world.key)"), ("Content-Type", "application/json")],
            body: try JSONSerialization.data(withJSONObject: ["userId": "zoe", "deviceId": "phone", "receiptData": Data(receipt.utf8).base64EncodedString()])
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
}
