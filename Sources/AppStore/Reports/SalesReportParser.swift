import Foundation
import LedgerDomain

/// One day's Summary Sales Report as read from Apple's file: the in-app purchase lines to import,
/// and how many lines of other kinds it held.
public struct SalesReportFile: Hashable, Sendable {
    /// The day every line covers (`yyyy-MM-dd`), or the day the caller gave for a report with no lines.
    public let reportDate: String
    /// The header's column names, in the file's order (trimmed): which report version it is.
    public let columns: [String]
    /// The in-app purchase lines (`SalesReportLine.isInAppPurchase`), in file order.
    public let lines: [SalesReportLine]
    /// Lines of other kinds (app downloads, updates, bundles): validated like the others, then only counted.
    public let otherLines: Int

    public init(reportDate: String, columns: [String], lines: [SalesReportLine], otherLines: Int) {
        self.reportDate = reportDate
        self.columns = columns
        self.lines = lines
        self.otherLines = otherLines
    }
}

/// Reads Apple's daily Summary Sales Report (App Store Connect > Sales and Trends, SALES/SUMMARY/DAILY),
/// gzip or plain: tab-separated UTF-8 text with a header line.
///
/// Columns are found by their header name, never by position, so every report version (1_0 to 1_4,
/// which add columns such as `Order Type` or `Proceeds Reason`) reads alike and unknown columns are
/// ignored. Every line is validated, in-app purchase or not, and the first problem refuses the whole
/// file with its line and column: a report is imported whole or not at all. Amounts stay decimal text,
/// normalised (`.70` → `0.70`), never floating point.
public enum SalesReportParser {
    /// The most a gzip file may inflate to.
    public static let maximumDecompressedSize = 256 * 1024 * 1024
    /// The most data lines a file may hold.
    public static let maximumLines = 1_000_000
    /// The longest field, in characters (Apple's widest columns are VARCHAR(4000)).
    public static let maximumFieldLength = 4000

    /// The report in `data` (gzip, detected by its magic bytes, or plain text).
    ///
    /// - Parameter reportDate: the day the caller asked App Store Connect for (`yyyy-MM-dd`): when
    ///   given, every line must be of that day; a report with no lines needs it, since only its lines
    ///   tell its day otherwise.
    public static func parse(_ data: Data, reportDate: String? = nil) throws(SalesReportError) -> SalesReportFile {
        var givenDay: String?
        if let reportDate {
            guard let day = normalisedDate(reportDate) else { throw .invalidReportDate(reportDate) }
            givenDay = day
        }
        let text = Gzip.isGzip(data) ? try Gzip.decompress(data, limit: maximumDecompressedSize) : data
        let result = text.withUnsafeBytes { raw -> Result<SalesReportFile, SalesReportError> in
            Result { () throws(SalesReportError) -> SalesReportFile in
                var reader = Reader(bytes: raw.bindMemory(to: UInt8.self), givenDay: givenDay)
                return try reader.read()
            }
        }
        return try result.get()
    }

    // MARK: Fields

    /// A decimal number as Apple writes it (`1`, `-1`, `1.00`, `.70`, `-0.99`), in canonical text:
    /// a leading zero, the given decimals, no sign on zero. Nil when it is not such a number.
    static func normalisedDecimal(_ text: String) -> String? {
        var bytes = Substring(text).utf8[...]
        var negative = false
        if bytes.first == UInt8(ascii: "-") {
            negative = true
            bytes = bytes.dropFirst()
        }
        let integer = bytes.prefix { isDigit($0) }
        var rest = bytes[integer.endIndex...]
        var fraction = rest[rest.startIndex..<rest.startIndex]
        if rest.first == UInt8(ascii: ".") {
            rest = rest.dropFirst()
            fraction = rest.prefix { isDigit($0) }
            guard !fraction.isEmpty else { return nil }
            rest = rest[fraction.endIndex...]
        }
        guard rest.isEmpty, !integer.isEmpty || !fraction.isEmpty else { return nil }
        var integerText = String(decoding: integer.drop { $0 == UInt8(ascii: "0") }, as: UTF8.self)
        if integerText.isEmpty { integerText = "0" }
        let isZero = integerText == "0" && fraction.allSatisfy { $0 == UInt8(ascii: "0") }
        var out = negative && !isZero ? "-" : ""
        out += integerText
        if !fraction.isEmpty { out += "." + String(decoding: fraction, as: UTF8.self) }
        return out
    }

    /// A calendar date as `MM/DD/YYYY` (Apple's) or `YYYY-MM-DD`, as `yyyy-MM-dd`; nil when it is
    /// not one or not a real day (`02/30/2024`).
    static func normalisedDate(_ text: String) -> String? {
        let year: Int, month: Int, day: Int
        let slashParts = text.split(separator: "/", omittingEmptySubsequences: false)
        let dashParts = text.split(separator: "-", omittingEmptySubsequences: false)
        if slashParts.count == 3, (1...2).contains(slashParts[0].count), (1...2).contains(slashParts[1].count), slashParts[2].count == 4,
           let m = digits(slashParts[0]), let d = digits(slashParts[1]), let y = digits(slashParts[2]) {
            (year, month, day) = (y, m, d)
        } else if dashParts.count == 3, dashParts[0].count == 4, dashParts[1].count == 2, dashParts[2].count == 2,
                  let y = digits(dashParts[0]), let m = digits(dashParts[1]), let d = digits(dashParts[2]) {
            (year, month, day) = (y, m, d)
        } else {
            return nil
        }
        guard year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        return pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
    }

    private static func digits(_ text: Substring) -> Int? {
        guard !text.isEmpty, text.utf8.allSatisfy(isDigit) else { return nil }
        return Int(text)
    }

    private static func pad(_ value: Int, _ width: Int) -> String {
        let text = String(value)
        return String(repeating: "0", count: max(0, width - text.count)) + text
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    private static func isUppercaseCode(_ text: String, length: Int) -> Bool {
        text.utf8.count == length && text.utf8.allSatisfy { (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains($0) }
    }

    // MARK: Reading a file

    /// Where each column the ledger reads sits in this file's header (0-based).
    private struct Layout {
        static let required = [
            "SKU", "Title", "Product Type Identifier", "Units", "Developer Proceeds", "Begin Date", "End Date",
            "Customer Currency", "Country Code", "Currency of Proceeds", "Apple Identifier", "Customer Price",
        ]

        let names: [String]
        let sku, title, productType, units, developerProceeds, customerPrice: Int
        let customerCurrency, proceedsCurrency, countryCode, beginDate, endDate, appleIdentifier: Int
        let parentIdentifier, promoCode, subscription, period, proceedsReason, orderType, device: Int?

        init(names: [String], line: Int) throws(SalesReportError) {
            var index: [String: Int] = [:]
            for (column, name) in names.enumerated() {
                if let first = index[name] { throw .duplicateColumn(name, line: line, column: column + 1, first: first + 1) }
                index[name] = column
            }
            let missing = Self.required.filter { index[$0] == nil }
            guard missing.isEmpty else { throw .missingColumns(missing, line: line) }
            // Every required name is in `index`: checked just above.
            func at(_ name: String) -> Int { index[name]! }

            self.names = names
            (sku, title, productType, units) = (at("SKU"), at("Title"), at("Product Type Identifier"), at("Units"))
            (developerProceeds, customerPrice) = (at("Developer Proceeds"), at("Customer Price"))
            (customerCurrency, proceedsCurrency, countryCode) = (at("Customer Currency"), at("Currency of Proceeds"), at("Country Code"))
            (beginDate, endDate, appleIdentifier) = (at("Begin Date"), at("End Date"), at("Apple Identifier"))
            (parentIdentifier, promoCode, subscription, period) = (index["Parent Identifier"], index["Promo Code"], index["Subscription"], index["Period"])
            (proceedsReason, orderType, device) = (index["Proceeds Reason"], index["Order Type"], index["Device"])
        }
    }

    /// One pass over the file's bytes, a line at a time.
    private struct Reader {
        let bytes: UnsafeBufferPointer<UInt8>
        let givenDay: String?
        /// The next byte to read.
        var position = 0
        /// The 1-based number of the line last read.
        var lineNumber = 0
        /// The fields of the current line, as byte ranges without their surrounding spaces.
        var fields: [Range<Int>] = []

        init(bytes: UnsafeBufferPointer<UInt8>, givenDay: String?) {
            self.bytes = bytes
            self.givenDay = givenDay
            // A UTF-8 byte order mark, as some tools write it, is not part of the first column's name.
            if bytes.count >= 3, bytes[0] == 0xEF, bytes[1] == 0xBB, bytes[2] == 0xBF { position = 3 }
        }

        mutating func read() throws(SalesReportError) -> SalesReportFile {
            guard nextLine() else { throw .empty() }
            let layout = try header()

            var lines: [SalesReportLine] = []
            var otherLines = 0
            var dataLines = 0
            var days: Set<String> = []
            var secondDayLine: Int?
            while nextLine() {
                dataLines += 1
                if dataLines > maximumLines { throw .tooManyLines(line: lineNumber, limit: maximumLines) }
                guard fields.count == layout.names.count else {
                    throw .fieldCount(line: lineNumber, found: fields.count, expected: layout.names.count)
                }
                try checkLengths(layout)
                let line = try salesLine(layout)
                if line.isInAppPurchase { lines.append(line) } else { otherLines += 1 }

                if line.beginDate != line.endDate {
                    throw .spansDays(line: lineNumber, begin: line.beginDate, end: line.endDate)
                }
                if let givenDay, line.beginDate != givenDay {
                    throw .otherDay(line: lineNumber, found: line.beginDate, given: givenDay)
                }
                if days.insert(line.beginDate).inserted, days.count == 2 { secondDayLine = lineNumber }
            }

            if let secondDayLine { throw .manyDays(line: secondDayLine, days: days.sorted()) }
            guard let day = days.first ?? givenDay else { throw .dayUnknown() }
            return SalesReportFile(reportDate: day, columns: layout.names, lines: lines, otherLines: otherLines)
        }

        /// Moves to the next line that is not empty and splits it into `fields`; false at the end.
        mutating func nextLine() -> Bool {
            while position < bytes.count {
                lineNumber += 1
                let start = position
                var end = start
                while end < bytes.count, bytes[end] != 0x0A { end += 1 }
                position = end + 1
                if end > start, bytes[end - 1] == 0x0D { end -= 1 }
                if end == start { continue }

                fields.removeAll(keepingCapacity: true)
                var fieldStart = start
                for index in start...end where index == end || bytes[index] == 0x09 {
                    fields.append(trimmed(fieldStart..<index))
                    fieldStart = index + 1
                }
                return true
            }
            return false
        }

        private func trimmed(_ range: Range<Int>) -> Range<Int> {
            var lower = range.lowerBound, upper = range.upperBound
            while lower < upper, bytes[lower] == 0x20 { lower += 1 }
            while upper > lower, bytes[upper - 1] == 0x20 { upper -= 1 }
            return lower..<upper
        }

        private func text(_ column: Int) throws(SalesReportError) -> String {
            let range = fields[column]
            guard let text = String(validating: UnsafeBufferPointer(rebasing: bytes[range]), as: UTF8.self) else {
                throw .notUTF8(line: lineNumber)
            }
            return text
        }

        private func header() throws(SalesReportError) -> Layout {
            var names: [String] = []
            for column in fields.indices { names.append(try text(column)) }
            return try Layout(names: names, line: lineNumber)
        }

        /// Every field, read or ignored, within the longest width of Apple's columns.
        private func checkLengths(_ layout: Layout) throws(SalesReportError) {
            // A character is at most 4 bytes, at least 1: only long byte runs need counting.
            for column in fields.indices where fields[column].count > maximumFieldLength {
                let length = try text(column).count
                if length > maximumFieldLength {
                    throw .fieldTooLong(line: lineNumber, column: column + 1, name: layout.names[column], length: length,
                                        limit: maximumFieldLength)
                }
            }
        }

        private func salesLine(_ layout: Layout) throws(SalesReportError) -> SalesReportLine {
            func place(_ column: Int) -> (line: Int, column: Int, name: String) {
                (lineNumber, column + 1, layout.names[column])
            }
            func filled(_ column: Int) throws(SalesReportError) -> String {
                let value = try text(column)
                let at = place(column)
                guard !value.isEmpty else { throw .emptyField(line: at.line, column: at.column, name: at.name) }
                return value
            }
            func optional(_ column: Int?) throws(SalesReportError) -> String? {
                guard let column else { return nil }
                let value = try text(column)
                return value.isEmpty ? nil : value
            }
            func decimal(_ column: Int) throws(SalesReportError) -> String {
                let value = try filled(column)
                let at = place(column)
                if value.contains(",") { throw .groupedNumber(value, line: at.line, column: at.column, name: at.name) }
                guard let number = normalisedDecimal(value) else { throw .notANumber(value, line: at.line, column: at.column, name: at.name) }
                return number
            }
            /// Units are DECIMAL(18,2) in Apple's documentation, but whole in practice: `3.00` is 3.
            func wholeNumber(_ column: Int) throws(SalesReportError) -> String {
                let number = try decimal(column)
                let parts = number.split(separator: ".", maxSplits: 1)
                guard parts.count == 2 else { return number }
                guard parts[1].allSatisfy({ $0 == "0" }) else {
                    let at = place(column)
                    throw .fractionalUnits(try text(column), line: at.line, column: at.column, name: at.name)
                }
                return String(parts[0])
            }
            func date(_ column: Int) throws(SalesReportError) -> String {
                let value = try filled(column)
                guard let day = normalisedDate(value) else {
                    let at = place(column)
                    throw .notADate(value, line: at.line, column: at.column, name: at.name)
                }
                return day
            }
            func currency(_ column: Int) throws(SalesReportError) -> String {
                let value = try filled(column)
                guard isUppercaseCode(value, length: 3) else {
                    let at = place(column)
                    throw .notACurrency(value, line: at.line, column: at.column, name: at.name)
                }
                return value
            }
            func country(_ column: Int) throws(SalesReportError) -> String {
                let value = try filled(column)
                guard isUppercaseCode(value, length: 2) else {
                    let at = place(column)
                    throw .notACountry(value, line: at.line, column: at.column, name: at.name)
                }
                return value
            }

            return SalesReportLine(
                sku: try filled(layout.sku), title: try text(layout.title), productTypeIdentifier: try filled(layout.productType),
                units: try wholeNumber(layout.units), developerProceeds: try decimal(layout.developerProceeds),
                customerPrice: try decimal(layout.customerPrice), customerCurrency: try currency(layout.customerCurrency),
                proceedsCurrency: try currency(layout.proceedsCurrency), countryCode: try country(layout.countryCode),
                beginDate: try date(layout.beginDate), endDate: try date(layout.endDate),
                appleIdentifier: try filled(layout.appleIdentifier), parentIdentifier: try optional(layout.parentIdentifier),
                promoCode: try optional(layout.promoCode), subscription: try optional(layout.subscription),
                period: try optional(layout.period), proceedsReason: try optional(layout.proceedsReason),
                orderType: try optional(layout.orderType), device: try optional(layout.device)
            )
        }
    }
}
