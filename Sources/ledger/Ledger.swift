import ArgumentParser
import LedgerApplication
import LedgerCommandLine

@main
struct Ledger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Purchase Ledger: an append-only, event-sourced ledger of in-app purchases on PostgreSQL.",
        discussion: """
            With no LEDGER_DATABASE_URL the ledger runs its own PostgreSQL under .ledger/ (see `ledger db`). \
            Start with `ledger serve`; inspect the log with `ledger log tail` and `ledger audit verify`. \
            Benchmarks and the fuzzer are a program of their own: `swift run -c release ledger-bench --help`.
            """,
        subcommands: [Serve.self, Migrate.self, Apps.self, Keys.self, DB.self, Log.self, ProjectionsCommand.self, Query.self, Audit.self, Reports.self, Notifications.self, AppStoreCommand.self, Webhooks.self, AppStoreSim.self, Demo.self]
    )

    static func main() async {
        await runReportingDatabaseErrors()
    }
}
