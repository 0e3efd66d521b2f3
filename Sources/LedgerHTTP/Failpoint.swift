import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Fault injection for the fault tests: `LEDGER_FAILPOINT=<name>` in the environment of
/// `ledger serve` makes the process kill itself with SIGKILL when it reaches that point, so a
/// test can crash it exactly where a real crash would hurt most. Unset, nothing happens; the
/// server logs a warning at start when one is set.
public enum Failpoint: String, Sendable, CaseIterable {
    /// A command's append has committed; its answer is neither kept nor sent.
    case afterCommandAppend = "after-command-append"

    /// The failpoint the environment names, if any.
    public static let armed: Failpoint? = ProcessInfo.processInfo.environment["LEDGER_FAILPOINT"].flatMap(Failpoint.init(rawValue:))

    /// Dies here when this failpoint is armed.
    func reach() {
        guard Self.armed == self else { return }
        kill(getpid(), SIGKILL)
    }
}
