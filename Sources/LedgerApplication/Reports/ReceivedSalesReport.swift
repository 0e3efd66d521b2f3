import Foundation
import LedgerDomain

/// A sales report file to record for an app: its bytes as received, and what the parser read
/// from them (the parser is Apple's format's, in the `AppStore` module).
public struct ReceivedSalesReport: Sendable {
    public let content: Data
    /// Apple's reporting day (`yyyy-MM-dd`).
    public let reportDate: String
    public let columns: [String]
    public let lines: [SalesReportLine]
    public let otherLines: Int
    /// `file:<name>`.
    public let source: String
    public let vendorNumber: String?

    public init(content: Data, reportDate: String, columns: [String], lines: [SalesReportLine], otherLines: Int,
                source: String, vendorNumber: String?) {
        self.content = content
        self.reportDate = reportDate
        self.columns = columns
        self.lines = lines
        self.otherLines = otherLines
        self.source = source
        self.vendorNumber = vendorNumber
    }
}
