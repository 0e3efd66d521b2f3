import Foundation
import LedgerDomain
import Logging

/// Records Apple's sales reports for an app: each file kept as received (`SalesReportArchive`),
/// its in-app purchase lines a fact in the log (`SalesReportReceived` on `reports/<bundle id>`).
///
/// The same file again records nothing (its hash is the fact's deduplication key). Another file
/// of a day already reported is Apple's correction: a new fact naming the one it supersedes, and
/// reconciliation reads the latest; the first stays in the log. Called alike by `ledger reports
/// import` and the tests.
public struct ImportSalesReports: Sendable {
    /// What one file became.
    public struct Outcome: Sendable, Hashable {
        public enum Kind: String, Sendable, Hashable {
            /// The first report of its day.
            case recorded
            /// A corrected report of a day already reported.
            case superseding
            /// The same file was recorded before: nothing new.
            case duplicate
        }

        public let kind: Kind
        public let reportDate: String
        public let contentHash: String
        public let position: Int64
        /// The hash of the report it replaces, for `superseding`.
        public let supersedes: String?
        public let lines: Int
    }

    /// One report of a day, as the log holds it.
    public struct Recorded: Sendable, Hashable {
        public let report: SalesReportReceived
        public let position: Int64
        public let recordedAt: Date
    }

    let store: any EventStore
    let archive: any SalesReportArchive
    let directory: any AppDirectory
    let logger: Logger

    public init(store: any EventStore, archive: any SalesReportArchive, directory: any AppDirectory, logger: Logger) {
        self.store = store
        self.archive = archive
        self.directory = directory
        self.logger = logger
    }

    public func record(_ report: ReceivedSalesReport, app: String, metadata: [String: String] = [:]) async throws -> Outcome {
        guard try await directory.isRegistered(app) else { throw AccessError.unknownApp(app) }
        let hash = ContentHash.sha256Hex(report.content)
        let key = try DeduplicationKey.salesReport(app: app, contentHash: hash)
        let stream = try StreamID.reports(app: app)
        for _ in 0..<8 {
            if let earlier = try await store.recorded([key])[key] {
                return Outcome(kind: .duplicate, reportDate: report.reportDate, contentHash: hash, position: earlier.position,
                               supersedes: nil, lines: report.lines.count)
            }
            let history = try await Self.readWhole(stream, from: store)
            let previous = history.last { $0.report.reportDate == report.reportDate }
            let fact = SalesReportReceived(
                reportDate: report.reportDate, contentHash: hash, source: report.source, vendorNumber: report.vendorNumber,
                columns: report.columns, lines: report.lines, otherLines: report.otherLines, supersedes: previous?.report.contentHash
            )
            try await archive.keep(SalesReportFileContent(contentHash: hash, app: app, reportDate: report.reportDate,
                                                          source: report.source, content: report.content))
            let event = try NewEvent(fact, metadata: metadata.merging(["source": report.source]) { first, _ in first },
                                     deduplicationKey: key)
            let expected: ExpectedVersion = history.last.map { .exactly($0.version) } ?? .noStream
            let result: AppendResult
            do {
                result = try await store.append([event], to: stream, expecting: expected)
            } catch let error as StoreError where error.code == .wrongExpectedVersion {
                continue  // another import of this app landed first: decide again on the stream as it is now
            }
            switch result.outcomes.first {
            case .appended(let position, _)?:
                let kind: Outcome.Kind = previous == nil ? .recorded : .superseding
                logger.notice("sales report recorded", metadata: [
                    "ledger.app": "\(app)", "ledger.report_date": "\(report.reportDate)", "ledger.lines": "\(report.lines.count)",
                    "ledger.kind": "\(kind.rawValue)", "ledger.position": "\(position)",
                ])
                return Outcome(kind: kind, reportDate: report.reportDate, contentHash: hash, position: position,
                               supersedes: previous?.report.contentHash, lines: report.lines.count)
            case .duplicate(let earlier)?:
                return Outcome(kind: .duplicate, reportDate: report.reportDate, contentHash: hash, position: earlier.position,
                               supersedes: nil, lines: report.lines.count)
            case nil:
                throw StoreError.integrity("the append of a sales report answered no outcome")
            }
        }
        throw StoreError.wrongExpectedVersion(stream: stream.rawValue, expected: "the version read", actual: -1)
    }

    /// The latest report of each day from `from` to `to` (`yyyy-MM-dd`, both included), by day.
    public func latest(app: String, from: String, to: String) async throws -> [String: Recorded] {
        var latest: [String: Recorded] = [:]
        for entry in try await Self.readWhole(StreamID.reports(app: app), from: store)
        where entry.report.reportDate >= from && entry.report.reportDate <= to {
            latest[entry.report.reportDate] = Recorded(report: entry.report, position: entry.position, recordedAt: entry.recordedAt)
        }
        return latest
    }

    /// Every report of the app in log order.
    static func readWhole(_ stream: StreamID, from store: any EventStore) async throws
        -> [(report: SalesReportReceived, position: Int64, version: Int64, recordedAt: Date)]
    {
        var entries: [(report: SalesReportReceived, position: Int64, version: Int64, recordedAt: Date)] = []
        var next: Int64 = 1
        while true {
            let page = try await store.readStream(stream, fromVersion: next, limit: 500)
            for event in page where event.type == SalesReportReceived.typeName.stored {
                entries.append((try LedgerJSON.decode(SalesReportReceived.self, from: event.data), event.position, event.streamVersion,
                                event.recordedAt))
            }
            guard page.count == 500, let last = page.last else { return entries }
            next = last.streamVersion + 1
        }
    }
}
