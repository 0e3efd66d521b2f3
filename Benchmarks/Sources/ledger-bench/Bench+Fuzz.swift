import ArgumentParser
import Foundation
import LedgerApplication
import LedgerBenchmarks
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LedgerTesting
import LocalPostgres
import Logging

extension Bench {
    struct Fuzz: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fuzz the receipt parser and every JSON body of the HTTP API with seeded mutations.",
            discussion: """
                Runs the ledger's server, its projections and the App Store simulator in this process, on free loopback ports, over a scratch database <database>_fuzz (created afresh, dropped afterwards). Test users buy, renew and get refunds in the simulator and their receipts are recorded; then --cases cases take turns over the targets: the receipt parser in this process (mutated verifyReceipt answers, carried through the receipt decision, the stored events and the fold), and through HTTP the receipts, finish, failures, revoke, consumptions, restore and product routes (mutated bodies, wrong Content-Type, odd Idempotency-Keys) and receipts whose App Store answers are mutated.

                Properties: no crash, no 5xx (only a 503 for an App Store answer that cannot be read, the designed answer), every refusal a JSON error with a code and a message, and nothing recorded for a refused input (the log's last position and the receipts and answers kept are compared before and after each case); after the last case, no projection failed. Prints the counts per target and the failures with their case numbers; exits 1 when there is any. The same --seed sends the same mutations; --trace prints each case before it runs, so that a crash names its case. Logs at level error unless --log-level says otherwise, so that the cause of a 500 is printed.
                """
        )

        @OptionGroup var options: GlobalOptions
        @Option(help: "Cases in all, over every target.") var cases = 100_000
        @Option(help: "Random seed (default: from the clock, printed).") var seed: UInt64?
        @Option(help: "A folder of verifyReceipt answers (*.json) to mutate besides the simulator's.")
        var fixtures = "Tests/AppStoreTests/Fixtures"
        @Flag(help: "Print each case's number and target before it runs.") var trace = false
        @Flag(help: "Keep the scratch database for inspection.") var keep = false

        func validate() throws {
            guard cases >= 1 else { throw ValidationError("--cases must be at least 1") }
        }

        func run() async throws {
            var options = self.options
            if options.logLevel == nil, ProcessInfo.processInfo.environment["LEDGER_LOG_LEVEL"] == nil { options.logLevel = "error" }
            let logger = try options.makeLogger()
            let seed = self.seed ?? UInt64(Date().timeIntervalSince1970 * 1000)
            let fixtureAnswers: [Data]
            if FileManager.default.fileExists(atPath: fixtures) {
                fixtureAnswers = try ReceiptParserFuzz.answers(inDirectory: URL(fileURLWithPath: fixtures))
            } else if self.fixtures != Self.defaultFixtures {
                throw CommandFailure(message: "--fixtures \(fixtures): no such folder")
            } else {
                fixtureAnswers = []
            }
            // Created and migrated by the owner when one is known; the cases run as the server's role.
            let roles = try await options.databaseRoles(logger: logger)
            let scratch = try await roles.recreate(database: roles.runtime.database + "_fuzz", logger: logger).runtime
            Output.error("bench fuzz: seed \(seed), \(cases) cases, scratch database \(scratch.database), \(fixtureAnswers.count) fixture answers")
            Output.error("bench fuzz: to run these cases again: ledger-bench fuzz --seed \(seed) --cases \(cases)")
            let (cases, trace) = (self.cases, self.trace)
            let terminal = Output.errorIsTerminal
            let report = try await LedgerDatabase.withClient(scratch, maximumConnections: 20, logger: logger) { client in
                try await LedgerFuzzWorld.run(client: client, settings: scratch, logger: logger) { world in
                    let parser = try ReceiptParserFuzz(answers: world.simulatorAnswers + fixtureAnswers, products: LedgerFuzzWorld.products)
                    let api = try LedgerAPIFuzz(world: world, seed: seed, answers: fixtureAnswers)
                    return try await MutationFuzzer(parser: parser, api: api).run(.init(cases: cases, seed: seed)) { index, target in
                        if trace {
                            Output.error("case \(index) \(target)")
                        } else if index % 1_000 == 0, index > 0 {
                            let line = "bench fuzz: \(index) of \(cases) cases"
                            if terminal { Output.progress("\r" + line) } else { Output.error(line) }
                        }
                    }
                }
            }
            if terminal, !trace { Output.error("") }
            if !keep {
                try await roles.drop(database: scratch.database, logger: logger)
            }
            Output.line("fuzz seed=\(seed) cases=\(report.cases)")
            for line in report.lines { Output.line(line) }
            guard report.isClean else {
                for failure in report.failures { Output.line(failure.description) }
                if report.failureCount > report.failures.count {
                    Output.line("… and \(report.failureCount - report.failures.count) more failures")
                }
                throw CommandFailure(message: "the fuzzer found \(report.failureCount) failures; replay with --seed \(seed) --cases \(cases) --trace")
            }
        }

        static let defaultFixtures = "Tests/AppStoreTests/Fixtures"
    }
}
