import ArgumentParser
import PostgresNIO

@main
struct Ledger: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ledger",
        abstract: "Purchase Ledger: an append-only, event-sourced ledger of in-app purchases on PostgreSQL.",
        discussion: """
            With no LEDGER_DATABASE_URL the ledger runs its own PostgreSQL under .ledger/ (see `ledger db`). \
            Start with `ledger serve`; inspect the log with `ledger log tail` and `ledger audit verify`.
            """,
        subcommands: [Serve.self, Migrate.self, Apps.self, Keys.self, DB.self, Log.self, ProjectionsCommand.self, Query.self, Audit.self, AppStoreCommand.self, Bench.self, AppStoreSim.self, Demo.self]
    )

    /// Runs the chosen command; database errors are shown with the server's own message, which
    /// postgres-nio hides from `description` by default.
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
        } catch let error as PSQLError {
            let server = error.serverInfo
            var message = "PostgreSQL refused: \(server?[.message] ?? "\(error.code)")"
            if let detail = server?[.detail] { message += " (\(detail))" }
            if let hint = server?[.hint] { message += "; \(hint)" }
            exit(withError: CommandFailure(message: message))
        } catch {
            exit(withError: error)
        }
    }
}

/// A failure reported as one line, without the usage text that `ValidationError` adds.
struct CommandFailure: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}
