import Crypto
import Foundation
import LedgerApplication
import LedgerStore
import Logging
import PostgresNIO

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The PostgreSQL server the ledger runs for itself when no `LEDGER_DATABASE_URL` is given.
///
/// It lives under `<home>/postgres` (home is `.ledger` in the working directory unless
/// `LEDGER_HOME` says otherwise): created with initdb on first use, listening on 127.0.0.1 only,
/// password authentication, reused afterwards. When the program runs as root, initdb and postgres
/// run as an unprivileged user (`postgres`, or `LEDGER_POSTGRES_USER`), since PostgreSQL refuses root.
public struct LocalPostgres: Sendable {
    /// What `ledger db status` reports.
    public struct Status: Sendable {
        public let initialized: Bool
        public let running: Bool
        public let port: Int?
        public let dataDirectory: String
    }

    /// Whether committed data must survive a crash of the machine.
    public enum Durability: Sendable {
        /// The ledger's own server: every commit is flushed to disk before it is acknowledged.
        case durable
        /// A server for data that is thrown away (the tests' databases): no flushes to disk at
        /// all. Dropping a database forces a checkpoint; with flushes, hundreds of test databases
        /// turned into minutes of disk waits that stalled every other test's commits.
        case throwaway

        /// Server options for `pg_ctl start -o`; they also apply to a cluster created durable.
        var serverOptions: String {
            switch self {
            case .durable: ""
            // The tests run some sixty suites at once, each with a database, a server and a pool
            // of its own: 300 connections ran out (measured: 303 in use), and requests waited
            // for a slot past their deadline.
            case .throwaway: " -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=1000"
            }
        }
    }

    public static let databaseName = "ledger"
    /// The role `ledger serve` logs in as: a member of `runtimeGroup`, owner of nothing.
    public static let roleName = "ledger"
    /// The role that owns the database and its schema, and migrates.
    public static let ownerRoleName = "ledger_owner"
    /// What migration 0007 grants the server's rights to.
    public static let runtimeGroup = "ledger_runtime"

    public let home: URL
    let durability: Durability
    let serverUser: String?
    let binDirectory: URL?
    /// A port asked for (`LEDGER_POSTGRES_PORT`): kept, never moved when it is taken.
    let fixedPort: Int?

    public init(environment: [String: String] = ProcessInfo.processInfo.environment, durability: Durability = .durable) {
        let home = environment["LEDGER_HOME"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".ledger")
        self.home = home.standardizedFileURL
        self.durability = durability
        self.serverUser = getuid() == 0 ? (environment["LEDGER_POSTGRES_USER"] ?? "postgres") : nil
        self.binDirectory = environment["LEDGER_POSTGRES_BIN"].map { URL(fileURLWithPath: $0) }
        self.fixedPort = environment["LEDGER_POSTGRES_PORT"].flatMap(Int.init)
    }

    var root: URL { home.appendingPathComponent("postgres") }
    var dataDirectory: URL { root.appendingPathComponent("data") }
    /// The port and the generated passwords of the ledger's two roles (mode 0600).
    public var stateFile: URL { home.appendingPathComponent("postgres.json") }
    /// The cluster superuser's password (mode 0600), apart: it is needed only to create the
    /// cluster, its roles and its database, and for `ledger db psql --admin`. Once the ledger has
    /// started once it may be removed (or kept offline): `serve` starts without it.
    public var superuserPasswordFile: URL { home.appendingPathComponent("postgres-superuser.pw") }
    var logFile: URL { root.appendingPathComponent("server.log") }
    var lockFile: URL { home.appendingPathComponent("postgres.lock") }
    /// The key that seals shared secrets when no `LEDGER_SECRET_KEY(_FILE)` is set (mode 0600).
    public var secretKeyFile: URL { home.appendingPathComponent("secret.key") }

    // MARK: Commands

    /// Creates the cluster if needed, starts it if it is not running, and makes sure the ledger's
    /// role and database exist. Safe to call from several processes at once.
    public func start(logger: Logger) async throws -> DatabaseSettings {
        let state = try withLock { () throws -> State in
            let bin = try postgresBinDirectory()
            var state = try loadState() ?? State.generate()
            if let fixedPort { state.port = fixedPort }
            if state.ownerPassword == nil { state.ownerPassword = State.randomHex() }
            if !FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) {
                logger.info("creating the local PostgreSQL cluster", metadata: ["ledger.data": "\(dataDirectory.path)"])
                let superuserPassword = State.randomHex()
                try PrivateFile.write(Data((superuserPassword + "\n").utf8), to: superuserPasswordFile)
                try initialize(bin: bin, superuserPassword: superuserPassword)
            }
            if try !isRunning(bin: bin) {
                if !Self.isPortFree(state.port) {
                    // Another program took the port while the server was stopped.
                    guard fixedPort == nil else {
                        throw StoreError.localServer("port \(state.port) (LEDGER_POSTGRES_PORT) on 127.0.0.1 is taken by another program")
                    }
                    state.port = try Self.findFreePort()
                }
                try saveState(state)
                logger.info("starting the local PostgreSQL", metadata: ["ledger.port": "\(state.port)"])
                // Right after an immediate stop the old server's processes may still hold its port
                // or shared memory for a moment; the new one then exits at once. Tried again then.
                var attempt = 1
                while true {
                    do {
                        try run(bin.appendingPathComponent("pg_ctl"), [
                            "-D", dataDirectory.path, "-l", logFile.path, "-w", "-t", "120",
                            "-o", "-p \(state.port)\(durability.serverOptions)", "start",
                        ], asServerUser: true, what: "starting PostgreSQL (its log: \(logFile.path))")
                        break
                    } catch where attempt < 10 && previousServerStillLeaving() {
                        attempt += 1
                        logger.info("the previous PostgreSQL is still leaving; starting again shortly")
                        Thread.sleep(forTimeInterval: 0.5)
                    } catch {
                        // pg_ctl only says it stopped waiting; the reason is in the server's log.
                        throw StoreError.localServer("\(error) — the last lines of its log:\n\(logTail(lines: 15))")
                    }
                }
            } else if let port = try runningPort() {
                state.port = port
            }
            try saveState(state)
            return state
        }
        if let superuserPassword = try superuserPassword() {
            try await bootstrap(state: state, superuserPassword: superuserPassword, logger: logger)
        } else {
            try await checkBootstrapped(state: state, logger: logger)
        }
        return state.applicationSettings
    }

    /// The superuser's password, nil once its file was removed.
    func superuserPassword() throws -> String? {
        guard let text = try? String(contentsOf: superuserPasswordFile, encoding: .utf8) else { return nil }
        let password = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return password.isEmpty ? nil : password
    }

    /// With no superuser password on disk: the roles and the database must be there already, as
    /// the first start left them; the owner's login shows it.
    private func checkBootstrapped(state: State, logger: Logger) async throws {
        do {
            try await Self.withConnection(state.ownerSettings, logger: logger) { connection in
                let rows = try await connection.query("""
                    SELECT count(*) FROM pg_roles r WHERE r.rolname = \(Self.runtimeGroup)
                       AND pg_has_role(\(Self.roleName), r.oid, 'MEMBER')
                    """, logger: logger).collect()
                guard try rows.first?.decode(Int64.self) == 1 else {
                    throw StoreError.localServer("the local PostgreSQL lacks the role \(Self.roleName) in \(Self.runtimeGroup)")
                }
            }
        } catch {
            throw StoreError.localServer(
                "the local PostgreSQL's roles or database are not as the ledger left them (\(error)), and the superuser's password file \(superuserPasswordFile.path) is gone, so they cannot be made again: put the file back, or remove \(home.path) to start afresh"
            )
        }
        logger.debug("local PostgreSQL ready; its superuser's password is not on disk")
    }

    /// Whether the server log's last lines say a start failed because the previous server's
    /// processes still held its port, shared memory or lock file.
    private func previousServerStillLeaving() -> Bool {
        let tail = logTail(lines: 10)
        return ["Address already in use", "pre-existing shared memory block", "lock file", "is another postmaster"]
            .contains { tail.contains($0) }
    }

    /// The server log's last `lines` lines (empty when there is no log yet).
    public func logTail(lines: Int) -> String {
        guard let text = try? String(contentsOf: logFile, encoding: .utf8) else { return "" }
        return text.split(separator: "\n").suffix(lines).joined(separator: "\n")
    }

    /// How `stop` ends the server's sessions.
    public enum StopMode: String, Sendable {
        /// Open sessions are ended and a checkpoint is written: what `ledger db stop` does.
        case fast
        /// As if the server crashed: no checkpoint, recovery from the WAL on the next start (what
        /// the fault tests do to it). Committed data is safe when the cluster flushes to disk.
        case immediate
    }

    /// Stops the server if it runs.
    public func stop(mode: StopMode = .fast) throws {
        try withLock {
            let bin = try postgresBinDirectory()
            guard try isRunning(bin: bin) else { return }
            try run(bin.appendingPathComponent("pg_ctl"), ["-D", dataDirectory.path, "-m", mode.rawValue, "-w", "stop"],
                    asServerUser: true, what: "stopping PostgreSQL")
        }
    }

    public func status() throws -> Status {
        let initialized = FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path)
        let running = initialized ? try isRunning(bin: postgresBinDirectory()) : false
        return Status(
            initialized: initialized,
            running: running,
            port: running ? try runningPort() : try loadState()?.port,
            dataDirectory: dataDirectory.path
        )
    }

    /// The settings of the ledger's own database, as `start` would return them (without starting).
    public func settings() throws -> DatabaseSettings? {
        try loadState()?.applicationSettings
    }

    /// The owner's settings (migrations, scratch databases), as `start` leaves them (without starting).
    public func ownerSettings() throws -> DatabaseSettings? {
        try loadState()?.ownerSettings
    }

    /// Superuser settings, for tests and maintenance that must create databases or roles; nil
    /// when there is no cluster, or its superuser's password file was removed.
    public func administratorSettings() throws -> DatabaseSettings? {
        guard let state = try loadState(), let password = try superuserPassword() else { return nil }
        return state.administratorSettings(password: password)
    }

    // MARK: Cluster creation

    private func initialize(bin: URL, superuserPassword: String) throws {
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: dataDirectory)
        let passwordFile = root.appendingPathComponent("initdb.pw")
        // Mode 0600 from its creation; owned by the server user, who runs initdb, when we are root.
        try PrivateFile.write(Data((superuserPassword + "\n").utf8), to: passwordFile, owner: serverAccount())
        defer { try? FileManager.default.removeItem(at: passwordFile) }
        try handToServerUser(root)
        try run(bin.appendingPathComponent("initdb"), [
            "-D", dataDirectory.path, "-U", "postgres", "--auth=scram-sha-256",
            "--pwfile=\(passwordFile.path)", "-E", "UTF8", "--no-locale",
        ], asServerUser: true, what: "initdb")
        let settings = """

            # Written by the ledger: a private server for one checkout.
            listen_addresses = '127.0.0.1'
            unix_socket_directories = ''
            max_connections = 300
            shared_buffers = 256MB
            wal_buffers = 16MB
            max_wal_size = 2GB
            logging_collector = off

            """
        let handle = try FileHandle(forWritingTo: dataDirectory.appendingPathComponent("postgresql.conf"))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(settings.utf8))
    }

    /// Creates the ledger's roles and database on first start, and brings a cluster made by an
    /// older ledger (one role that owned everything) to the two roles: the owner keeps every object,
    /// the server's role keeps only what migration 0007 grants it.
    private func bootstrap(state: State, superuserPassword: String, logger: Logger) async throws {
        let admin = state.administratorSettings(password: superuserPassword).with(database: "postgres")
        try await Self.withConnection(admin, logger: logger) { connection in
            func exists(_ role: String) async throws -> Bool {
                try await !connection.query("SELECT 1 FROM pg_roles WHERE rolname = \(role)", logger: logger).collect().isEmpty
            }
            // Identifiers and the generated hex passwords cannot be bound; both are fixed or hex.
            // A role another process creates first is as good as ours.
            func create(_ role: String, _ options: String) async throws {
                guard try await !exists(role) else { return }
                do {
                    try await connection.query("CREATE ROLE \(unescaped: role) \(unescaped: options)", logger: logger)
                } catch let error as PSQLError where error.ledgerSQLState == .duplicateObject || error.ledgerSQLState == .uniqueViolation {}
            }
            try await create(Self.ownerRoleName, "LOGIN CREATEDB PASSWORD '\(state.ownerPassword ?? "")'")
            try await create(Self.runtimeGroup, "NOLOGIN")
            try await create(Self.roleName, "LOGIN PASSWORD '\(state.applicationPassword)'")
            try await connection.query("ALTER ROLE \(unescaped: Self.roleName) NOCREATEDB", logger: logger)
            try await connection.query("GRANT \(unescaped: Self.runtimeGroup) TO \(unescaped: Self.roleName)", logger: logger)
            // The followers' horizon (ledger.follow_horizon) passes over transactions of other
            // databases only when it can see them in pg_stat_activity; without this, any other
            // role's transaction on the server would hold every projection of the ledger back.
            try await connection.query("GRANT pg_read_all_stats TO \(unescaped: Self.runtimeGroup)", logger: logger)
            // DROP DATABASE … WITH (FORCE) of a scratch or test database ends the sessions still in
            // it, the server's role's among them; only a role allowed to signal them may.
            try await connection.query("GRANT pg_signal_backend TO \(unescaped: Self.ownerRoleName)", logger: logger)
            // Also sent by the ledger's own connections (DatabaseSettings.runtimeTimeouts); set on the
            // role, they hold for any other client that logs in as it.
            for (name, value) in DatabaseSettings.runtimeTimeouts.sorted(by: { $0.key < $1.key }) {
                try await connection.query("ALTER ROLE \(unescaped: Self.roleName) SET \(unescaped: name) = '\(unescaped: value)'", logger: logger)
            }
            let owner = try await connection.query(
                "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = \(Self.databaseName)", logger: logger
            ).collect().first?.decode(String.self)
            switch owner {
            case nil:
                do {
                    try await connection.query(
                        "CREATE DATABASE \(unescaped: Self.databaseName) OWNER \(unescaped: Self.ownerRoleName)", logger: logger
                    )
                } catch let error as PSQLError where error.ledgerSQLState == .duplicateDatabase {
                    // Another process created it first.
                }
            case Self.roleName?:
                logger.notice("moving the ledger's database to its owner role: the server's role will own nothing", metadata: [
                    "ledger.owner": "\(Self.ownerRoleName)", "ledger.runtime_role": "\(Self.roleName)",
                ])
                try await Self.withConnection(state.administratorSettings(password: superuserPassword).with(database: Self.databaseName), logger: logger) { database in
                    try await database.query("REASSIGN OWNED BY \(unescaped: Self.roleName) TO \(unescaped: Self.ownerRoleName)", logger: logger)
                }
            default:
                break
            }
        }
    }

    private static func withConnection(
        _ settings: DatabaseSettings, logger: Logger, _ body: (PostgresConnection) async throws -> Void
    ) async throws {
        let connection = try await PostgresConnection.connect(configuration: try settings.connectionConfiguration, id: 1, logger: logger)
        do {
            try await body(connection)
            try await connection.close()
        } catch {
            try? await connection.close()
            throw error
        }
    }

    // MARK: Processes

    private func isRunning(bin: URL) throws -> Bool {
        guard FileManager.default.fileExists(atPath: dataDirectory.appendingPathComponent("PG_VERSION").path) else {
            return false
        }
        let status = try run(bin.appendingPathComponent("pg_ctl"), ["-D", dataDirectory.path, "status"],
                             asServerUser: true, what: "pg_ctl status", allowFailure: true)
        return status == 0
    }

    /// The port the running server listens on, from postmaster.pid (line 4).
    private func runningPort() throws -> Int? {
        let pidFile = dataDirectory.appendingPathComponent("postmaster.pid")
        guard let text = try? String(contentsOf: pidFile, encoding: .utf8) else { return nil }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        return lines.count > 3 ? Int(lines[3].trimmingCharacters(in: .whitespaces)) : nil
    }

    /// Runs a PostgreSQL program and waits for it. `posix_spawn` and `waitpid` rather than
    /// Foundation's `Process`, whose exit monitoring can miss the exit of a program that leaves a
    /// daemon behind (`pg_ctl start`) when no run loop is turning, as in a test runner.
    @discardableResult
    private func run(_ executable: URL, _ arguments: [String], asServerUser: Bool, what: String,
                     allowFailure: Bool = false) throws -> Int32 {
        let argv: [String] = if asServerUser, let user = serverUser {
            ["/usr/sbin/runuser", "-u", user, "--", executable.path] + arguments
        } else {
            [executable.path] + arguments
        }
        // Output goes to a file, not a pipe: the server started by `pg_ctl start` keeps our
        // output descriptors open, and a pipe would never reach end-of-file.
        let outputPath = FileManager.default.temporaryDirectory
            .appendingPathComponent("ledger-pg-\(UUID().uuidString).out").path
        defer { unlink(outputPath) }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        ChildProcess.closeInheritedDescriptors(&actions)

        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        guard spawned == 0 else {
            throw StoreError.localServer("\(what): could not run \(argv[0]) (\(String(cString: strerror(spawned))))")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else {
                throw StoreError.localServer("\(what): lost track of \(argv[0]) (\(String(cString: strerror(errno))))")
            }
        }
        // WIFEXITED / WEXITSTATUS, which Swift does not import as functions.
        let exitCode: Int32 = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        if exitCode != 0 && !allowFailure {
            let printed = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
            throw StoreError.localServer(
                "\(what) failed (exit \(exitCode)): \(printed.trimmingCharacters(in: .whitespacesAndNewlines))"
            )
        }
        return exitCode
    }

    /// The unprivileged account the server runs as when we run as root; nil otherwise.
    private func serverAccount() throws -> PrivateFile.Owner? {
        guard let user = serverUser else { return nil }
        guard let account = getpwnam(user) else {
            throw StoreError.localServer(
                "running as root, PostgreSQL must run as an unprivileged user, but user '\(user)' does not exist: create it or set LEDGER_POSTGRES_USER"
            )
        }
        return PrivateFile.Owner(uid: account.pointee.pw_uid, gid: account.pointee.pw_gid)
    }

    /// Gives the cluster's folder to the unprivileged server user when we run as root.
    private func handToServerUser(_ folder: URL) throws {
        guard let user = serverUser, let account = try serverAccount() else { return }
        let (uid, gid) = (account.uid, account.gid)
        guard chown(folder.path, uid, gid) == 0 else {
            throw StoreError.localServer("could not give \(folder.path) to user '\(user)' (errno \(errno))")
        }
        chmod(folder.path, 0o700)
        // The server user must be able to reach the folder: every parent needs search permission.
        var parent = folder.deletingLastPathComponent()
        while parent.path != "/" {
            if access(parent.path, X_OK) == 0, let info = try? FileManager.default.attributesOfItem(atPath: parent.path),
               let mode = info[.posixPermissions] as? Int, mode & 0o001 == 0 {
                throw StoreError.localServer(
                    "user '\(user)' cannot enter \(parent.path) (mode \(String(mode, radix: 8))): run the ledger from a folder other users can reach, or set LEDGER_HOME"
                )
            }
            parent = parent.deletingLastPathComponent()
        }
    }

    private func postgresBinDirectory() throws -> URL {
        if let binDirectory { return binDirectory }
        let fileManager = FileManager.default
        let versions = ((try? fileManager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? [])
            .compactMap(Int.init).sorted(by: >)
        for version in versions {
            let bin = URL(fileURLWithPath: "/usr/lib/postgresql/\(version)/bin")
            if fileManager.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let bin = URL(fileURLWithPath: String(directory))
            if fileManager.isExecutableFile(atPath: bin.appendingPathComponent("initdb").path) { return bin }
        }
        throw StoreError.localServer(
            "PostgreSQL server programs (initdb, pg_ctl) were not found: install them (Debian: apt-get install postgresql-15), set LEDGER_POSTGRES_BIN to their folder, or set LEDGER_DATABASE_URL to use an existing server"
        )
    }

    // MARK: State

    /// Port and the generated passwords of the ledger's roles, kept beside the cluster (mode 0600).
    struct State: Codable, Sendable {
        var port: Int
        /// Only in state files of ledgers before it moved to its own file; moved there on load.
        var superuserPassword: String?
        var applicationPassword: String
        /// Absent in state files of ledgers before the role split; generated on their next start.
        var ownerPassword: String?

        static func generate() throws -> State {
            State(port: try LocalPostgres.findFreePort(), superuserPassword: nil, applicationPassword: randomHex(), ownerPassword: randomHex())
        }

        static func randomHex() -> String {
            SymmetricKey(size: .bits128).withUnsafeBytes { Data($0) }.map { String(format: "%02x", $0) }.joined()
        }

        var applicationSettings: DatabaseSettings {
            var settings = DatabaseSettings(host: "127.0.0.1", port: port, username: LocalPostgres.roleName,
                                            password: applicationPassword, database: LocalPostgres.databaseName, tls: .disable)
            settings.sessionSettings = DatabaseSettings.runtimeTimeouts
            return settings
        }

        var ownerSettings: DatabaseSettings {
            DatabaseSettings(host: "127.0.0.1", port: port, username: LocalPostgres.ownerRoleName,
                             password: ownerPassword, database: LocalPostgres.databaseName, tls: .disable)
        }

        func administratorSettings(password: String) -> DatabaseSettings {
            DatabaseSettings(host: "127.0.0.1", port: port, username: "postgres", password: password, database: "postgres", tls: .disable)
        }
    }

    private func loadState() throws -> State? {
        guard let data = try? Data(contentsOf: stateFile) else { return nil }
        var state: State
        do {
            state = try JSONDecoder().decode(State.self, from: data)
        } catch {
            throw StoreError.localServer("\(stateFile.path) is damaged (\(error)); stop the server and remove \(home.path) to start afresh")
        }
        // A state file of before: its superuser's password moves to a file of its own.
        if let password = state.superuserPassword {
            if !FileManager.default.fileExists(atPath: superuserPasswordFile.path) {
                try PrivateFile.write(Data((password + "\n").utf8), to: superuserPasswordFile)
            }
            state.superuserPassword = nil
            try saveState(state)
        }
        return state
    }

    private func saveState(_ state: State) throws {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // It holds both passwords: mode 0600 from its creation, never written in place.
        try PrivateFile.write(try encoder.encode(state), to: stateFile)
    }

    /// Serialises cluster management between processes (tests start it from many at once).
    private func withLock<T>(_ body: () throws -> T) throws -> T {
        try FileManager.default.createDirectory(at: home, withIntermediateDirectories: true)
        let descriptor = open(lockFile.path, O_CREAT | O_RDWR, 0o600)
        guard descriptor >= 0 else { throw StoreError.localServer("cannot open \(lockFile.path) (errno \(errno))") }
        defer { close(descriptor) }
        guard flock(descriptor, LOCK_EX) == 0 else { throw StoreError.localServer("cannot lock \(lockFile.path)") }
        defer { flock(descriptor, LOCK_UN) }
        return try body()
    }

    // MARK: Ports

    static func isPortFree(_ port: Int) -> Bool {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        // As PostgreSQL binds: a port whose last connections are still in TIME_WAIT (a server
        // just stopped) is free to listen on again.
        var reuse: Int32 = 1
        setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &reuse, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return result == 0
    }

    static func findFreePort() throws -> Int {
        for port in 54330..<54500 where isPortFree(port) { return port }
        throw StoreError.localServer("no free TCP port between 54330 and 54499 on 127.0.0.1 for the local PostgreSQL")
    }
}
