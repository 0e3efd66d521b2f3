import Foundation
import LedgerBenchmarks
import LedgerTesting
import Testing

/// The fuzzer's run in the suite: 2,000 cases with a fixed seed through the parser and the real
/// server over a real PostgreSQL. `ledger-bench fuzz` runs the same with 100,000.
@Suite struct MutationFuzzerTests {
    static let seed: UInt64 = 13
    static let cases = 2_000

    /// The App Store fixtures of the client's tests, mutated besides the simulator's answers.
    static var fixtureAnswers: [Data] {
        get throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().deletingLastPathComponent()
            return try ReceiptParserFuzz.answers(inDirectory: root.appendingPathComponent("Tests/AppStoreTests/Fixtures"))
        }
    }

    @Test func mutatedBodiesAndAnswersNeverCrashNorAnswer5xxAndRefusedOnesRecordNothing() async throws {
        let fixtures = try Self.fixtureAnswers
        #expect(fixtures.count >= 6, "the App Store fixtures are found")
        let report = try await TestDatabase.withDatabase { client, settings in
            try await LedgerFuzzWorld.run(client: client, settings: settings, logger: quietLogger) { world in
                let parser = try ReceiptParserFuzz(answers: world.simulatorAnswers + fixtures, products: LedgerFuzzWorld.products)
                let api = try LedgerAPIFuzz(world: world, seed: Self.seed, answers: fixtures)
                return try await MutationFuzzer(parser: parser, api: api).run(.init(cases: Self.cases, seed: Self.seed))
            }
        }
        for failure in report.failures {
            Issue.record("\(failure)")
        }
        #expect(report.isClean, "\(report.failureCount) failures; seed \(Self.seed): \(report.lines.joined(separator: "\n"))")
        #expect(report.cases == Self.cases)
        #expect(report.tallies.count == 11, "the parser and ten HTTP targets, the two signed-payload routes among them")
        for tally in report.tallies {
            #expect(tally.cases >= Self.cases / 12, "\(tally.target) had its turns")
            #expect(tally.refusedTotal > 0, "\(tally.target): some mutations are refused")
            #expect(tally.accepted > 0, "\(tally.target): some mutations are still valid and taken")
        }
        // The mutations reach past the JSON reader: into field checks, the App Store and the decisions.
        let refusals = Set(report.tallies.flatMap { $0.refused.keys })
        for reason in ["400 invalid_json", "400 invalid_request", "422 invalid_receipt", "503 appstore_bad_response", "malformed_app_store_response",
                       "401 invalid_signature", "422 invalid_signed_transaction"] {
            #expect(refusals.contains(reason), "some case was refused with \(reason)")
        }
    }
}
