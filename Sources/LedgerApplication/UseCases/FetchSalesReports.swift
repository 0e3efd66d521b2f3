import Foundation
import LedgerDomain

/// `ledger reports fetch`: Apple's Summary Sales Report of each day of a period, downloaded from
/// App Store Connect and recorded as an imported file is (`ImportSalesReports`): the same report
/// again records nothing, a corrected one supersedes. A day Apple cannot give yet (its report comes
/// the next day) or refuses is said, and the other days are still fetched.
public struct FetchSalesReports: Sendable {
    /// What became of one day.
    public struct Day: Sendable {
        public let day: String
        public let outcome: ImportSalesReports.Outcome?
        public let failure: String?
    }

    let source: any SalesReportSource
    let importer: ImportSalesReports

    public init(source: any SalesReportSource, importer: ImportSalesReports) {
        self.source = source
        self.importer = importer
    }

    public func fetch(app: String, from: String, to: String, timeZone: String = ReconcileSalesReports.defaultTimeZone,
                      each: @Sendable (Day) -> Void = { _ in }) async throws -> [Day] {
        let period = try ReconcileSalesReports.period(from: from, to: to, timeZone: timeZone)
        var days: [Day] = []
        for day in period.days {
            let result: Day
            do {
                let report = try await source.summarySalesReport(day: day)
                result = Day(day: day, outcome: try await importer.record(report, app: app, metadata: ["fetched": "app-store-connect"]), failure: nil)
            } catch let error as SalesReportFetchError where error.code != .refused {
                result = Day(day: day, outcome: nil, failure: error.message)
            }
            each(result)
            days.append(result)
        }
        return days
    }
}
