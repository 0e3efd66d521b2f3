import ArgumentParser
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerStore
import LocalPostgres

struct DB: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "db",
        abstract: "Manage the local PostgreSQL the ledger runs when no LEDGER_DATABASE_URL is set.",
        discussion: """
            The server lives under .ledger/postgres (or $LEDGER_HOME/postgres), listens on 127.0.0.1 only \
            and is created on first use. As root, it runs as the 'postgres' user ($LEDGER_POSTGRES_USER).
            """,
        subcommands: [Start.self, Stop.self, Status.self, URL.self]
    )

    struct Start: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create the local server if needed and start it.")
        @OptionGroup var options: GlobalOptions

        func run() async throws {
            let logger = try options.makeLogger()
            let settings = try await LocalPostgres().start(logger: logger)
            Output.line("local PostgreSQL running: \(settings.url())")
        }
    }

    struct Stop: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Stop the local server (committed data is kept).")

        func run() async throws {
            try LocalPostgres().stop()
            Output.line("local PostgreSQL stopped")
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Say whether the local server exists and runs.")

        func run() async throws {
            let status = try LocalPostgres().status()
            if !status.initialized {
                Output.line("local PostgreSQL: not created yet (it will be under \(status.dataDirectory) on first use)")
                throw ExitCode(3)
            }
            if status.running {
                Output.line("local PostgreSQL: running on 127.0.0.1:\(status.port.map(String.init) ?? "?") (data: \(status.dataDirectory))")
            } else {
                Output.line("local PostgreSQL: stopped (data: \(status.dataDirectory)); `ledger db start` starts it")
                throw ExitCode(3)
            }
        }
    }

    struct URL: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the local server's connection URL (with its password), e.g. for psql.",
            discussion: "Example: psql \"$(ledger db url)\""
        )

        @Flag(help: "The superuser's URL instead of the server's role.")
        var admin = false

        @Flag(help: "The owner's URL (the role that migrates) instead of the server's role.")
        var owner = false

        func run() async throws {
            let local = LocalPostgres()
            guard let settings = try admin ? local.administratorSettings() : owner ? local.ownerSettings() : local.settings() else {
                if admin, try local.settings() != nil {
                    throw CommandFailure(message: "the local PostgreSQL's superuser password is not on disk (\(local.superuserPasswordFile.path) was removed): put the file back for superuser work")
                }
                throw CommandFailure(message: "the local PostgreSQL has not been created yet: run `ledger db start` first")
            }
            Output.line(settings.url(showingPassword: true))
        }
    }
}
