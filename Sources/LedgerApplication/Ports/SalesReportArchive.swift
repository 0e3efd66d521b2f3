import Foundation

/// Keeps Apple's sales report files as they were received, before the fact that names them is
/// appended. Content-addressed and append-only, like the receipts' archive: the same file twice is
/// kept once, and nothing kept is ever changed.
public protocol SalesReportArchive: Sendable {
    func keep(_ file: SalesReportFileContent) async throws
}

/// One sales report file, byte for byte, and what names it.
public struct SalesReportFileContent: Sendable, Hashable {
    public let contentHash: String
    public let app: String
    /// Apple's reporting day (`yyyy-MM-dd`).
    public let reportDate: String
    public let source: String
    public let content: Data

    public init(contentHash: String, app: String, reportDate: String, source: String, content: Data) {
        self.contentHash = contentHash
        self.app = app
        self.reportDate = reportDate
        self.source = source
        self.content = content
    }
}
