import Foundation

/// Apple's Summary Sales Report of one reporting day was received for an app (stream
/// `reports/<bundle id>`): its in-app purchase lines, and the hash of the file as received (kept
/// in `ledger.sales_reports`).
///
/// The same file twice is recorded once (keyed by its hash). Apple may publish a corrected report
/// of a day: it is a new fact that names the one it `supersedes`; both stay in the log, and
/// reconciliation reads the latest of each day.
public struct SalesReportReceived: LedgerEvent {
    public static let typeName = try! EventTypeName("SalesReportReceived", version: 1)

    /// Apple's reporting day (`yyyy-MM-dd`), in the report's time zone.
    public let reportDate: String
    /// SHA-256 of the file's bytes as received (gzip or plain).
    public let contentHash: String
    /// Where it came from: `file:<name>` or `app-store-connect`.
    public let source: String
    /// The vendor number, when known (the API's, or the file name's).
    public let vendorNumber: String?
    /// The header's columns, in order: which of Apple's report versions it is.
    public let columns: [String]
    /// The in-app purchase lines.
    public let lines: [SalesReportLine]
    /// Lines of other kinds (app downloads, updates, bundles) the file also held.
    public let otherLines: Int
    /// The content hash of the report of the same day this one replaces.
    public let supersedes: String?

    public init(reportDate: String, contentHash: String, source: String, vendorNumber: String?, columns: [String],
                lines: [SalesReportLine], otherLines: Int, supersedes: String?) {
        self.reportDate = reportDate
        self.contentHash = contentHash
        self.source = source
        self.vendorNumber = vendorNumber
        self.columns = columns
        self.lines = lines
        self.otherLines = otherLines
        self.supersedes = supersedes
    }
}
