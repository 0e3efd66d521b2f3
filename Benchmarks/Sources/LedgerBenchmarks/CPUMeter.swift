import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// CPU time (user + system) that named processes and PostgreSQL spent, read from Linux's `/proc`:
/// sampled before and after a phase, it says where the phase's work went when the processes share
/// the machine's cores. Every process named `postgres` on the machine counts as PostgreSQL (the
/// postmaster, the backends, the WAL writer); one that ended between two samples is not counted.
public struct CPUMeter: Sendable {
    /// The name PostgreSQL's processes are counted under.
    public static let postgres = "PostgreSQL"

    /// The processes measured by name, in the order they are reported (PostgreSQL last).
    public let processes: [(name: String, pid: Int32)]

    public init(processes: [(name: String, pid: Int32)]) {
        self.processes = processes
    }

    /// Whether this machine has `/proc` to read (Linux); elsewhere nothing is measured.
    public static var isAvailable: Bool { FileManager.default.fileExists(atPath: "/proc/self/stat") }

    /// Seconds of CPU each process and PostgreSQL have used so far.
    public func sample() -> Sample {
        var seconds: [String: Double] = [:]
        for (name, pid) in processes { seconds[name, default: 0] += Self.cpuSeconds(of: pid) ?? 0 }
        seconds[Self.postgres] = Self.postgresPIDs().reduce(0) { $0 + (Self.cpuSeconds(of: $1) ?? 0) }
        return Sample(seconds: seconds)
    }

    /// What one process or PostgreSQL used between two samples.
    public struct Use: Sendable {
        public let name: String
        public let seconds: Double
    }

    public struct Sample: Sendable {
        let seconds: [String: Double]
    }

    /// The names in reporting order.
    public var order: [String] { processes.map(\.name) + [Self.postgres] }

    /// What each process and PostgreSQL used since `earlier`, in reporting order.
    public func used(since earlier: Sample) -> [Use] {
        let now = sample()
        return order.map { Use(name: $0, seconds: max(0, (now.seconds[$0] ?? 0) - (earlier.seconds[$0] ?? 0))) }
    }

    /// Runs `work`, and returns what it returned with the CPU each process used meanwhile.
    public func measure<T>(_ work: () async throws -> T) async rethrows -> (T, [Use]) {
        let before = sample()
        let value = try await work()
        return (value, used(since: before))
    }

    /// utime + stime of every thread of `pid`, from fields 14 and 15 of `/proc/<pid>/stat`
    /// (after the command name, which may hold spaces and parentheses).
    static func cpuSeconds(of pid: Int32) -> Double? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return nil }
        return cpuSeconds(stat: text, ticksPerSecond: Double(sysconf(Int32(_SC_CLK_TCK))))
    }

    /// utime + stime of a `/proc/<pid>/stat` line, in seconds.
    static func cpuSeconds(stat text: String, ticksPerSecond: Double) -> Double? {
        guard let close = text.lastIndex(of: ")") else { return nil }
        let fields = text[text.index(after: close)...].split(separator: " ")
        // fields[0] is the state (field 3); utime is field 14, stime field 15.
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return nil }
        return (user + system) / ticksPerSecond
    }

    static func postgresPIDs() -> [Int32] {
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: "/proc") else { return [] }
        return entries.compactMap { entry in
            guard let pid = Int32(entry),
                  let name = try? String(contentsOfFile: "/proc/\(entry)/comm", encoding: .utf8),
                  name.trimmingCharacters(in: .whitespacesAndNewlines) == "postgres"
            else { return nil }
            return pid
        }
    }
}
