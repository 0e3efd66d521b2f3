import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerCommandLine
import LedgerRuntime
import LedgerStore
import LedgerTesting
import NIOCore
import Synchronization

/// A server of the `ledger` program beside this one (`ledger serve`, `ledger appstore-sim`) run as
/// a child process of a benchmark, on a free loopback port, its log in a file: measured apart from
/// whatever loads it.
struct ChildServer {
    let process: SpawnedProcess
    let port: Int
    let base: String
    let log: URL

    /// Starts `ledger serve` on `database` and waits until it listens.
    static func start(database: DatabaseRoles, logLevel: String, log: URL, environment extra: [String: String?] = [:]) async throws -> ChildServer {
        let port = try freeLoopbackPort()
        var environment: [String: String?] = extra
        environment["LEDGER_DATABASE_URL"] = database.runtime.url(showingPassword: true)
        environment["LEDGER_OWNER_DATABASE_URL"] = .some(database.owner?.url(showingPassword: true))
        return try await spawn("ledger serve", ["serve", "--port", "\(port)", "--log-level", logLevel], port: port, environment: environment, log: log)
    }

    /// Starts `ledger appstore-sim` as `environment`'s App Store and waits until it listens.
    static func startSimulator(environment: String, logLevel: String, log: URL) async throws -> ChildServer {
        let port = try freeLoopbackPort()
        return try await spawn("ledger appstore-sim", ["appstore-sim", "--port", "\(port)", "--environment", environment, "--log-level", logLevel],
                               port: port, environment: [:], log: log)
    }

    /// Runs this executable with `arguments` (which make it listen on `port`), this process's
    /// environment with `extra` over it (a nil value unsets the variable), and waits until it answers HTTP.
    private static func spawn(_ name: String, _ arguments: [String], port: Int, environment extra: [String: String?], log: URL) async throws -> ChildServer {
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in extra { environment[name] = value }
        let program = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent().appendingPathComponent("ledger")
        guard FileManager.default.isExecutableFile(atPath: program.path) else {
            throw CommandFailure(message: "\(program.path) is not there: build `ledger` as well (`swift build -c release --product ledger`)")
        }
        let process = try SpawnedProcess(program, arguments, environment: environment, output: log)
        let server = ChildServer(process: process, port: port, base: "http://127.0.0.1:\(port)", log: log)
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if try await server.answersHealth() { return server }
            guard process.isRunning else {
                let text = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
                throw CommandFailure(message: "\(name) exited before it listened; its log (\(log.path)) ends:\n\(text.suffix(2_000))")
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        server.stop()
        throw CommandFailure(message: "\(name) did not answer HTTP within 60 s; see \(log.path)")
    }

    /// Whether `GET /health` answers at all (any status, 404 too: the server listens).
    func answersHealth() async throws -> Bool {
        let request = HTTPClientRequest(url: base + "/health")
        guard let response = try? await HTTPClient.shared.execute(request, timeout: .seconds(2)) else { return false }
        _ = try? await response.body.collect(upTo: 1 << 20)
        return true
    }

    /// A port nothing listens on now, from the kernel (bound to port 0, then let go).
    static func freeLoopbackPort() throws -> Int {
        do { return try LoopbackSocket.freePort() } catch {
            throw CommandFailure(message: "cannot find a free loopback port: \(error)")
        }
    }

    /// SIGTERM, then SIGKILL if it has not ended within `grace`.
    func stop(grace: Duration = .seconds(20)) {
        guard process.isRunning else { return }
        process.signal(SIGTERM)
        let started = ContinuousClock.now
        while process.isRunning && started.duration(to: .now) < grace { usleep(20_000) }
        if process.isRunning {
            process.signal(SIGKILL)
            process.waitForExit()
        }
    }
}

/// A program this machine must have for a benchmark, found on PATH (or where Debian puts it).
enum ExternalTool {
    static func locate(_ name: String, package: String) throws -> URL {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        var folders = path.split(separator: ":").map(String.init)
        if let versions = try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql") {
            folders += versions.sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin" }
        }
        for folder in folders {
            let candidate = URL(fileURLWithPath: folder).appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        throw CommandFailure(message: "\(name) is not installed: apt-get install \(package)")
    }

    /// Runs a program to its end; returns what it wrote to stdout, or throws with what it wrote.
    /// Stopped (SIGKILL) and an error after `timeout`.
    static func run(_ program: URL, _ arguments: [String], timeout: Duration) async throws -> String {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-tool-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let output = folder.appendingPathComponent("output")
        let process = try SpawnedProcess(program, arguments, environment: ProcessInfo.processInfo.environment, output: output)
        let deadline = ContinuousClock.now + timeout
        while process.isRunning {
            guard ContinuousClock.now < deadline else {
                process.signal(SIGKILL)
                process.waitForExit()
                throw CommandFailure(message: "\(program.lastPathComponent) did not finish within \(timeout); stopped it")
            }
            try await Task.sleep(for: .milliseconds(50))
        }
        let printed = (try? String(contentsOf: output, encoding: .utf8)) ?? ""
        guard process.exitCode == 0 else {
            throw CommandFailure(message: "\(program.lastPathComponent) failed (exit \(process.exitCode ?? -1)): \(printed.suffix(2_000))")
        }
        return printed
    }
}

/// A child process started with `posix_spawn`, its signals as a shell would give them: none
/// blocked, every one at its default. Foundation's `Process` starts children from a thread that
/// blocks most signals, and they inherit that: pgbench never saw the SIGALRM that ends a timed
/// run. Standard output and error go to one file.
final class SpawnedProcess: Sendable {
    let pid: pid_t
    /// waitpid's status once it has ended and been reaped.
    private let status = Mutex<Int32?>(nil)

    init(_ program: URL, _ arguments: [String], environment: [String: String], output: URL) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, output.path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var none = sigset_t(), all = sigset_t()
        sigemptyset(&none)
        sigfillset(&all)
        posix_spawnattr_setsigmask(&attributes, &none)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var argv = ([program.path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, program.path, &actions, &attributes, &argv, &envp)
        guard spawned == 0 else {
            throw CommandFailure(message: "could not run \(program.path): \(String(cString: strerror(spawned)))")
        }
        self.pid = pid
    }

    /// Whether it still runs (reaping it once it has ended).
    var isRunning: Bool {
        status.withLock { status in
            if status != nil { return false }
            var raw: Int32 = 0
            if waitpid(pid, &raw, WNOHANG) == pid { status = raw }
            return status == nil
        }
    }

    /// Its exit code once it has ended (128 + the signal when a signal ended it).
    var exitCode: Int32? {
        guard !isRunning, let status = status.withLock({ $0 }) else { return nil }
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    func signal(_ signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    func waitForExit() {
        while isRunning { usleep(10_000) }
    }
}
