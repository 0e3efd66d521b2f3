import Foundation
import Logging
import Synchronization

/// swift-log's `StreamLogHandler` line format, written to standard error in batches.
///
/// `StreamLogHandler` writes every line with its own unbuffered write to standard error: with a
/// line per request, logging at info cost a fifth of the entitlement reads' throughput when the
/// log went to a file (`ledger-bench reads`). Here lines are gathered in memory and written by a
/// thread of their own every 20 ms, or at once when 64 KiB are waiting; an error or critical line
/// is written before `log` returns, with everything before it, and so is everything at exit. A
/// process killed outright loses at most the last 20 ms of lines below error. Metadata is sorted
/// and printed when it is set (as `StreamLogHandler` does), not for every line.
public struct BatchedLogHandler: LogHandler {
    public var logLevel: Logger.Level
    public var metadataProvider: Logger.MetadataProvider?
    public let label: String
    private var prettyMetadata: String?

    public var metadata = Logger.Metadata() {
        didSet { prettyMetadata = Self.prettify(metadata) }
    }

    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var pretty = prettyMetadata
        let provided = metadataProvider?.get() ?? [:]
        if !provided.isEmpty || !(event.metadata ?? [:]).isEmpty || event.error != nil {
            var merged = metadata
            merged.merge(provided) { _, new in new }
            merged.merge(event.metadata ?? [:]) { _, new in new }
            if let error = event.error {
                merged["error.message"] = "\(error)"
                merged["error.type"] = "\(String(reflecting: type(of: error)))"
            }
            pretty = Self.prettify(merged)
        }
        let line = "\(LogSink.shared.timestamp()) \(event.level)\(label.isEmpty ? "" : " ")\(label):\(pretty.map { " \($0)" } ?? "") [\(event.source)] \(event.message)\n"
        LogSink.shared.append(line, urgent: event.level >= .error)
    }

    @available(*, deprecated, renamed: "log(event:)")
    public func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String, function: String, line: UInt) {
        log(event: LogEvent(level: level, message: message, metadata: metadata, source: source, file: file, function: function, line: line))
    }

    private static func prettify(_ metadata: Logger.Metadata) -> String? {
        metadata.isEmpty ? nil : metadata.sorted { $0.key < $1.key }.map { "\($0)=\($1)" }.joined(separator: " ")
    }
}

/// The lines waiting for standard error, and the thread that writes them.
public final class LogSink: Sendable {
    public static let shared = LogSink()

    private struct State {
        var waiting: [UInt8] = []
        var second: time_t = -1
        var stamp = ""
    }

    private let state = Mutex(State())
    /// Held while writing, so that lines reach the file in the order they were logged.
    private let writing = Mutex(())
    public static let flushInterval: UInt32 = 20_000  // microseconds
    public static let eagerBytes = 64 * 1024

    private init() {
        let thread = Thread { [self] in
            while true {
                usleep(Self.flushInterval)
                flush()
            }
        }
        thread.name = "ledger-log"
        thread.start()
        atexit { LogSink.shared.flush() }
    }

    /// The local time to the second, as `StreamLogHandler` prints it; formatted once a second.
    public func timestamp() -> String {
        var now = time(nil)
        if let cached = state.withLock({ $0.second == now ? $0.stamp : nil }) { return cached }
        var parts = tm()
        localtime_r(&now, &parts)
        var buffer = [Int8](repeating: 0, count: 64)
        strftime(&buffer, buffer.count, "%Y-%m-%dT%H:%M:%S%z", &parts)
        let stamp = buffer.withUnsafeBufferPointer { String(cString: $0.baseAddress!) }
        state.withLock {
            $0.second = now
            $0.stamp = stamp
        }
        return stamp
    }

    public func append(_ line: String, urgent: Bool) {
        let full = state.withLock { state in
            state.waiting.append(contentsOf: line.utf8)
            return state.waiting.count >= Self.eagerBytes
        }
        if urgent || full { flush() }
    }

    /// Writes everything waiting, in order.
    public func flush() {
        writing.withLock { _ in
            let bytes = state.withLock { state -> [UInt8] in
                defer { state.waiting.removeAll(keepingCapacity: true) }
                return state.waiting
            }
            // Standard error gone: nothing to tell anyone.
            _ = bytes.withUnsafeBytes { Output.writeAll($0, to: STDERR_FILENO) }
        }
    }
}
