import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A program started with `posix_spawn`, waited for with `waitpid`. Foundation's `Process.run()`
/// on Linux reads past the end of `/proc/self/fd` entries and now and then crashes the calling
/// process with SIGSEGV (swift-corelibs-foundation pull request 5472; seen here in 2 of 4 runs of
/// the test suite, which holds many descriptors), and its exit monitoring needs a turning run
/// loop. Every descriptor above standard error is closed in the child.
public final class ChildProcess: @unchecked Sendable {
    /// Where a standard stream of the child goes.
    public enum Destination: Sendable {
        /// /dev/null.
        case null
        /// A file, created if missing, written from its start.
        case file(String)
        /// A descriptor of the calling process, duplicated into the child.
        case descriptor(Int32)
        /// Standard error only: wherever standard output goes.
        case output
    }

    public enum Reason: Sendable, Equatable {
        case exit
        case uncaughtSignal
    }

    public let processIdentifier: pid_t
    private let lock = NSLock()
    private var waitStatus: Int32?

    /// Starts `executable` with `arguments` and `environment` (the caller's when nil).
    public init(_ executable: URL, _ arguments: [String], environment: [String: String]? = nil, output: Destination = .null,
                error: Destination = .output) throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        for (stream, destination) in [(Int32(1), output), (Int32(2), error)] {
            switch destination {
            case .null: posix_spawn_file_actions_addopen(&actions, stream, "/dev/null", O_WRONLY, 0)
            case .file(let path): posix_spawn_file_actions_addopen(&actions, stream, path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
            case .descriptor(let descriptor): posix_spawn_file_actions_adddup2(&actions, descriptor, stream)
            case .output: posix_spawn_file_actions_adddup2(&actions, 1, stream)
            }
        }
        Self.closeInheritedDescriptors(&actions)
        let argv = [executable.path] + arguments
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid = pid_t()
        let spawned: Int32
        if let environment {
            var cEnvironment = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
            defer { cEnvironment.forEach { free($0) } }
            spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, &cEnvironment)
        } else {
            spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        }
        guard spawned == 0 else {
            throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "could not run \(argv[0]): \(String(cString: strerror(spawned)))"])
        }
        processIdentifier = pid
    }

    /// Reaps the child if it has exited (without waiting when `blocking` is false).
    @discardableResult
    private func reap(blocking: Bool) -> Int32? {
        lock.lock()
        defer { lock.unlock() }
        if let waitStatus { return waitStatus }
        var status: Int32 = 0
        while true {
            let result = waitpid(processIdentifier, &status, blocking ? 0 : WNOHANG)
            if result == processIdentifier {
                waitStatus = status
                return status
            }
            if result == 0 { return nil }
            guard errno == EINTR else { return nil }
        }
    }

    public var isRunning: Bool { reap(blocking: false) == nil }

    public func waitUntilExit() { reap(blocking: true) }

    /// SIGTERM.
    public func terminate() { if isRunning { kill(processIdentifier, SIGTERM) } }

    /// SIGKILL, then waits for the child.
    public func kill9() {
        if isRunning { kill(processIdentifier, SIGKILL) }
        waitUntilExit()
    }

    /// How the child ended (`exit` while it runs).
    public var terminationReason: Reason {
        guard let status = reap(blocking: false) else { return .exit }
        return (status & 0x7f) == 0 ? .exit : .uncaughtSignal
    }

    /// The exit code, or the signal that ended the child; 0 while it runs.
    public var terminationStatus: Int32 {
        guard let status = reap(blocking: false) else { return 0 }
        // WIFEXITED / WEXITSTATUS and WTERMSIG, which Swift does not import as functions.
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : status & 0x7f
    }

    /// Closes every descriptor above standard error in the child. Without this, a child inherits
    /// whatever the caller has open that is not close-on-exec (sockets, files), and PostgreSQL
    /// counts them against its own budget. `posix_spawn_file_actions_addclosefrom_np` (glibc 2.34+)
    /// is looked up at run time, as Swift does not import it; without it the open descriptors are
    /// listed from /proc/self/fd.
    static func closeInheritedDescriptors(_ actions: inout posix_spawn_file_actions_t) {
        typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
        if let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            let closeFrom = unsafeBitCast(symbol, to: CloseFrom.self)
            if closeFrom(&actions, 3) == 0 { return }
        }
        let open = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        for descriptor in open.compactMap(Int32.init) where descriptor > 2 && fcntl(descriptor, F_GETFD) != -1 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }
}
