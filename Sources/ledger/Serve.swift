import ArgumentParser
import LedgerApplication
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LocalPostgres

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the ledger's HTTP server (migrating the database first).",
        discussion: """
            With nothing configured it starts the managed local PostgreSQL under .ledger/, applies the \
            migrations and listens on 127.0.0.1:8080. Register an app and a key first:
              ledger apps add com.example.app --shared-secret <secret>
              ledger keys create --app com.example.app --scope ingest,read
            Receipts are verified with Apple's verifyReceipt unless LEDGER_APPSTORE_PRODUCTION_URL and \
            LEDGER_APPSTORE_SANDBOX_URL (or the flags) point elsewhere, e.g. at `ledger appstore-sim`.

            App Store shared secrets are stored sealed with the key of LEDGER_SECRET_KEY (base64 of 32 \
            bytes) or LEDGER_SECRET_KEY_FILE (a file only its owner can read); with the managed \
            PostgreSQL and neither set, with .ledger/secret.key, made on first use. Secrets stored before \
            sealing are sealed at start.

            Without sslmode in LEDGER_DATABASE_URL, a host other than loopback is reached over TLS only \
            (sslmode=require); verify-full with sslrootcert=FILE also checks the server's certificate.

            Slow or numerous clients are bounded: a connection idle for --idle-timeout-ms is closed, a \
            request body must arrive within --body-read-timeout-ms (else 408), and API requests past \
            --max-requests-in-flight get 503 with Retry-After at once.

            The configuration in effect is logged at start, secrets masked. Stop with Ctrl-C or SIGTERM: \
            requests in flight finish first.

            Two database roles: the server runs as --database-url's role, which may read, append through \
            ledger.append and write derived tables, and owns nothing; migrations run as the owner \
            (--owner-database-url). The managed PostgreSQL has both. With another server and no owner URL, \
            serve checks that no migration is pending instead of migrating.
            """
    )

    @OptionGroup var serve: ServeOptions

    func run() async throws {
        let logger = try serve.options.makeLogger()
        let (roles, configuration, secrets) = try await serve.resolve(logger: logger)
        do {
            try await LedgerRuntime.serve(roles: roles, configuration: configuration, secrets: secrets, logger: logger) { _ in }
        } catch {
            throw ServeOptions.listening(error, on: configuration.server)
        }
    }
}

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Apply the database migrations that are not applied yet.",
        discussion: """
            Runs as the owner: --owner-database-url or $LEDGER_OWNER_DATABASE_URL, else the managed server's owner, \
            else the one URL given (--database-url or $LEDGER_DATABASE_URL), which then must not be the server's role. \
            Safe to run twice, or from two processes at once. A migration file edited after it was applied is refused. \
            On a server the ledger does not manage, create the server's group role first, as a superuser: \
            CREATE ROLE ledger_runtime NOLOGIN; GRANT ledger_runtime TO <the role ledger serve logs in as>.
            """
    )

    @OptionGroup var options: GlobalOptions

    func run() async throws {
        let logger = try options.makeLogger()
        let roles = try await options.databaseRoles(logger: logger)
        var settings = roles.owner ?? roles.runtime
        settings.sessionSettings = [:]
        let report = try await LedgerDatabase.withClient(settings, logger: logger) { client in
            try await Migrator.bundled().migrate(client, logger: logger)
        }
        for name in report.applied { Output.line("applied \(name)") }
        Output.line("database \(settings.database) is up to date (\(report.applied.count) applied now, \(report.alreadyApplied) already applied)")
    }
}
