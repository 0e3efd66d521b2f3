import ArgumentParser
import Foundation
import LedgerCommandLine
import LedgerHTTP
import LedgerRuntime
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `ledger serve` that kills itself with SIGKILL at a chosen point, so that a fault test can crash
/// the server exactly where a real crash would hurt most. Test support: never in `ledger`.
struct FaultyServe: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Run `ledger serve`, killing this process at a fault point (for the fault tests).",
        discussion: "Takes every option of `ledger serve`. Without --kill-at it serves as `ledger serve` does."
    )

    /// Where the process dies.
    enum FaultPoint: String, ExpressibleByArgument, CaseIterable {
        /// A command sent with an Idempotency-Key has appended; its answer is neither kept nor sent.
        case afterCommandAppend = "after-command-append"
    }

    @OptionGroup var serve: ServeOptions

    @Option(help: "Where to die: \(FaultPoint.allCases.map(\.rawValue).joined(separator: ", ")).")
    var killAt: FaultPoint?

    func run() async throws {
        let logger = try serve.options.makeLogger()
        var (roles, configuration, secrets) = try await serve.resolve(logger: logger)
        if let point = killAt {
            logger.warning("fault injection armed: this process kills itself at a fault point", metadata: ["ledger.fault_point": "\(point.rawValue)"])
            switch point {
            case .afterCommandAppend:
                configuration.server.api.afterCommandAppend = { kill(getpid(), SIGKILL) }
            }
        }
        do {
            try await LedgerRuntime.serve(roles: roles, configuration: configuration, secrets: secrets, logger: logger) { _ in }
        } catch {
            throw ServeOptions.listening(error, on: configuration.server)
        }
    }
}
