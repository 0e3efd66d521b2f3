import Logging
import Synchronization

/// A log that keeps its lines in memory, for tests of what the ledger writes to its log (and what
/// it must not): each line with its level, message and metadata.
public final class CapturedLog: Sendable {
    public struct Line: Sendable {
        public let level: Logger.Level
        public let message: String
        public let metadata: [String: String]

        /// As a text log handler writes it: message and metadata on one line.
        public var rendered: String {
            ([message] + metadata.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }).joined(separator: " ")
        }
    }

    private let kept = Mutex<[Line]>([])

    public init() {}

    public var lines: [Line] { kept.withLock { $0 } }

    /// A logger writing here.
    public func logger(label: String = "captured", level: Logger.Level = .trace) -> Logger {
        var logger = Logger(label: label) { _ in Handler(log: self) }
        logger.logLevel = level
        return logger
    }

    func append(_ line: Line) {
        kept.withLock { $0.append(line) }
    }

    struct Handler: LogHandler {
        let log: CapturedLog
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            var all = metadata
            if let extra = event.metadata { all.merge(extra) { $1 } }
            log.append(Line(level: event.level, message: "\(event.message)", metadata: all.mapValues { "\($0)" }))
        }
    }
}
