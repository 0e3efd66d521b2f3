import LedgerDomain

/// Why a Summary Sales Report file was refused, with where (line and column) and what to do.
///
/// Nothing of a refused file is imported. Lines are 1-based and count every line of the file,
/// the header being line 1; a column is the header's 1-based index, and the message names it too
/// (`line 7, column 8 (Units): 'abc' is not a number`).
public struct SalesReportError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The kind of refusal; compare with the static members.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Base: Hashable, Sendable {
            case unreadable
            case tooLarge
            case badHeader
            case badLine
            case badValue
            case notOneDay
            case dayUnknown
        }

        private let base: Base

        private init(_ base: Base) {
            self.base = base
        }

        /// Not gzip that inflates, or not UTF-8 text.
        public static let unreadable = Code(.unreadable)
        /// Over a limit: decompressed size, number of lines, or a field's length.
        public static let tooLarge = Code(.tooLarge)
        /// The header misses a required column or names one twice: not a Summary Sales Report.
        public static let badHeader = Code(.badHeader)
        /// A line has not as many fields as the header.
        public static let badLine = Code(.badLine)
        /// A field is not the number, date or code its column holds.
        public static let badValue = Code(.badValue)
        /// The lines are not all of one day, or not of the day the caller gave.
        public static let notOneDay = Code(.notOneDay)
        /// The report has no lines and the caller did not give its day.
        public static let dayUnknown = Code(.dayUnknown)

        public var description: String {
            switch base {
            case .unreadable: "unreadable"
            case .tooLarge: "too_large"
            case .badHeader: "bad_header"
            case .badLine: "bad_line"
            case .badValue: "bad_value"
            case .notOneDay: "not_one_day"
            case .dayUnknown: "day_unknown"
            }
        }
    }

    public let code: Code
    /// The file's 1-based line, when the refusal is about one.
    public let line: Int?
    /// The header's 1-based column index, when the refusal is about one field.
    public let column: Int?
    /// The header's name of `column`.
    public let columnName: String?
    /// One sentence for the operator, starting with the place: what is wrong and what to do.
    public let message: String

    private init(_ code: Code, line: Int? = nil, column: Int? = nil, columnName: String? = nil, _ problem: String) {
        self.code = code
        self.line = line
        self.column = column
        self.columnName = columnName
        var place = ""
        if let line {
            place = "line \(line)"
            if let column {
                place += ", column \(column)"
                if let columnName { place += " (\(columnName))" }
            }
            place += ": "
        }
        self.message = place + problem
    }

    public var description: String { message }

    // MARK: The file

    /// The gzip stream ends before its end: the download was cut.
    static func truncatedGzip() -> Self {
        .init(.unreadable, "the gzip file is truncated (it ends inside its compressed data); download the report again")
    }

    /// zlib refused the gzip stream.
    static func corruptGzip(_ reason: String) -> Self {
        .init(.unreadable, "the gzip file is corrupt (zlib: \(reason)); download the report again")
    }

    static func decompressedTooLarge(limit: Int) -> Self {
        .init(.tooLarge,
              "the gzip file inflates to more than \(limit) bytes; a daily Summary Sales Report is far smaller: check that this is the right file")
    }

    static func notUTF8(line: Int) -> Self {
        .init(.unreadable, line: line,
              "the text is not UTF-8; give the report as App Store Connect delivers it (gzip or its decompressed text), not converted by a spreadsheet")
    }

    static func empty() -> Self {
        .init(.badHeader, line: 1, "the file is empty; a Summary Sales Report starts with a header line of tab-separated column names")
    }

    static func tooManyLines(line: Int, limit: Int) -> Self {
        .init(.tooLarge, line: line,
              "the report has more than \(limit) lines; a daily Summary Sales Report is far smaller: check that this is the right file")
    }

    // MARK: The header

    static func missingColumns(_ names: [String], line: Int) -> Self {
        let list = names.map { "'\($0)'" }.joined(separator: ", ")
        return .init(.badHeader, line: line, columnName: names.first,
                     "the header has no column \(list); give Apple's Summary Sales Report (Sales and Trends, SALES, SUMMARY), tab-separated with its header line")
    }

    static func duplicateColumn(_ name: String, line: Int, column: Int, first: Int) -> Self {
        .init(.badHeader, line: line, column: column, columnName: name,
              "the column is named \(UntrustedText.quoted(name)) like column \(first); the header must name each column once")
    }

    // MARK: Lines and fields

    static func fieldCount(line: Int, found: Int, expected: Int) -> Self {
        .init(.badLine, line: line,
              "the line has \(found) tab-separated fields but the header has \(expected) columns; the file is damaged or not one report")
    }

    static func fieldTooLong(line: Int, column: Int, name: String, length: Int, limit: Int) -> Self {
        .init(.tooLarge, line: line, column: column, columnName: name,
              "the field has \(length) characters, more than the \(limit) of any column of Apple's report; the file is damaged or not one report")
    }

    static func notANumber(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) is not a number; Apple writes numbers like 1, -1, 0.99 or .70")
    }

    static func groupedNumber(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) has a comma; Apple's report writes numbers with no thousands separator and a decimal point "
                  + "(1000, 0.70): give the file as downloaded, not re-saved by a spreadsheet")
    }

    static func fractionalUnits(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) is not a whole number of units; Apple counts units whole (1, -1, 3.00)")
    }

    static func notADate(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) is not a calendar date; Apple writes dates as MM/DD/YYYY (04/01/2024)")
    }

    static func notACurrency(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) is not a currency code; Apple writes ISO 4217 codes of three uppercase letters (USD)")
    }

    static func notACountry(_ text: String, line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name,
              "\(UntrustedText.quoted(text)) is not a country code; Apple writes ISO 3166-1 alpha-2 codes of two uppercase letters (US)")
    }

    static func emptyField(line: Int, column: Int, name: String) -> Self {
        .init(.badValue, line: line, column: column, columnName: name, "the field is empty; every line of Apple's report fills this column")
    }

    // MARK: The day

    /// The caller's `reportDate` is not a date.
    static func invalidReportDate(_ text: String) -> Self {
        .init(.badValue, "the report date \(UntrustedText.quoted(text)) is not a calendar date; give it as yyyy-MM-dd (2024-04-01)")
    }

    static func spansDays(line: Int, begin: String, end: String) -> Self {
        .init(.notOneDay, line: line,
              "the line covers \(begin) to \(end); the ledger imports Apple's DAILY Summary Sales Report, one day per file")
    }

    static func manyDays(line: Int, days: [String]) -> Self {
        let shown = days.prefix(5).joined(separator: ", ") + (days.count > 5 ? ", …" : "")
        return .init(.notOneDay, line: line,
                     "the report's lines are of \(days.count) days (\(shown)); the ledger imports Apple's DAILY Summary Sales Report, one day per file")
    }

    static func otherDay(line: Int, found: String, given: String) -> Self {
        .init(.notOneDay, line: line,
              "the line is of \(found), not of \(given) as given; import each day's report with its own date")
    }

    static func dayUnknown() -> Self {
        .init(.dayUnknown,
              "the report has no lines, so its day is unknown: give it (the report date, yyyy-MM-dd, as requested from App Store Connect)")
    }
}
