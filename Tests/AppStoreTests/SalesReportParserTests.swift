@testable import AppStore
import Foundation
import LedgerDomain
import Testing

/// Small reports written for these tests, in the shapes of Apple's Summary Sales Report versions.
private enum Fixture {
    /// Version 1_0's columns, in Apple's order.
    static let header1_0 = [
        "Provider", "Provider Country", "SKU", "Developer", "Title", "Version", "Product Type Identifier", "Units",
        "Developer Proceeds", "Begin Date", "End Date", "Customer Currency", "Country Code", "Currency of Proceeds",
        "Apple Identifier", "Customer Price", "Promo Code", "Parent Identifier", "Subscription", "Period", "Category", "CMB",
        "Device", "Supported Platforms",
    ]

    /// Lines 2 to 7 of a version 1_0 report of 2024-04-01: three kinds of in-app purchase, a refund,
    /// an app download and an update.
    static let rows1_0: [[String]] = [
        ["APPLE", "US", "com.example.coins100", "Example Ltd", "100 Coins", "", "IA1", "3", ".70", "04/01/2024", "04/01/2024",
         "USD", "US", "USD", "1500000001", ".99", "", "com.example.app", "", "", "Games", "", "iPhone", "iOS"],
        ["APPLE", "US", "com.example.pro.monthly", "Example Ltd", "Pro Monthly", "", "IAY", "1", "3.50", "04/01/2024", "04/01/2024",
         "EUR", "DE", "EUR", "1500000002", "4.99", "", "com.example.app", "New", "1 Month", "Games", "", "iPad", "iOS"],
        ["APPLE", "US", "com.example.coins100", "Example Ltd", "100 Coins", "", "IA1", "-1", ".70", "04/01/2024", "04/01/2024",
         "USD", "US", "USD", "1500000001", "-0.99", "", "com.example.app", "", "", "Games", "", "iPhone", "iOS"],
        ["APPLE", "US", "com.example.app", "Example Ltd", "Example", "2.1", "1F", "12", "0", "04/01/2024", "04/01/2024",
         "USD", "US", "USD", "1500000000", "0", "", "", "", "", "Games", "", "iPhone", "iOS"],
        ["APPLE", "US", "com.example.app", "Example Ltd", "Example", "2.1", "7", "40", "0", "04/01/2024", "04/01/2024",
         "USD", "US", "USD", "1500000000", "0", "", "", "", "", "Games", "", "iPhone", "iOS"],
        ["APPLE", "US", "com.example.coins100", "Example Ltd", "100 Coins", "", "FI1", "2", ".42", "04/01/2024", "04/01/2024",
         "GBP", "GB", "GBP", "1500000001", ".69", "", "com.example.app", "", "", "Games", "", "Desktop", "macOS"],
    ]

    /// The later versions' columns (`Proceeds Reason`, `Preserved Pricing`, `Client`, `Order Type`), in a
    /// shuffled order: the parser must read the header, not count columns.
    static let header1_4 = [
        "Apple Identifier", "SKU", "Title", "Order Type", "Units", "Customer Price", "Developer Proceeds", "Currency of Proceeds",
        "Customer Currency", "Country Code", "Begin Date", "End Date", "Product Type Identifier", "Parent Identifier",
        "Subscription", "Period", "Proceeds Reason", "Preserved Pricing", "Client", "Device", "Supported Platforms", "Category",
        "CMB", "Promo Code", "Provider", "Provider Country", "Developer", "Version",
    ]

    /// The same sales as `rows1_0`, some numbers spelt otherwise (`3.00`, `0.70`, `-.99`).
    static let rows1_4: [[String]] = [
        ["1500000001", "com.example.coins100", "100 Coins", "", "3.00", "0.99", "0.70", "USD", "USD", "US", "04/01/2024", "04/01/2024",
         "IA1", "com.example.app", "", "", "", "", "", "iPhone", "iOS", "Games", "", "", "APPLE", "US", "Example Ltd", ""],
        ["1500000002", "com.example.pro.monthly", "Pro Monthly", "", "1", "4.99", "3.50", "EUR", "EUR", "DE", "04/01/2024", "04/01/2024",
         "IAY", "com.example.app", "New", "1 Month", "", "", "", "iPad", "iOS", "Games", "", "", "APPLE", "US", "Example Ltd", ""],
        ["1500000001", "com.example.coins100", "100 Coins", "", "-1", "-.99", ".70", "USD", "USD", "US", "04/01/2024", "04/01/2024",
         "IA1", "com.example.app", "", "", "", "", "", "iPhone", "iOS", "Games", "", "", "APPLE", "US", "Example Ltd", ""],
        ["1500000000", "com.example.app", "Example", "", "12", "0", "0", "USD", "USD", "US", "04/01/2024", "04/01/2024",
         "1F", "", "", "", "", "", "", "iPhone", "iOS", "Games", "", "", "APPLE", "US", "Example Ltd", "2.1"],
        ["1500000000", "com.example.app", "Example", "", "40", "0", "0", "USD", "USD", "US", "04/01/2024", "04/01/2024",
         "7", "", "", "", "", "", "", "iPhone", "iOS", "Games", "", "", "APPLE", "US", "Example Ltd", "2.1"],
        ["1500000001", "com.example.coins100", "100 Coins", "", "2", ".69", ".42", "GBP", "GBP", "GB", "04/01/2024", "04/01/2024",
         "FI1", "com.example.app", "", "", "", "", "", "Desktop", "macOS", "Games", "", "", "APPLE", "US", "Example Ltd", ""],
    ]

    /// What both versions hold: the in-app purchase lines, in file order.
    static let expected = [
        SalesReportLine(
            sku: "com.example.coins100", title: "100 Coins", productTypeIdentifier: "IA1", units: "3", developerProceeds: "0.70",
            customerPrice: "0.99", customerCurrency: "USD", proceedsCurrency: "USD", countryCode: "US", beginDate: "2024-04-01",
            endDate: "2024-04-01", appleIdentifier: "1500000001", parentIdentifier: "com.example.app", device: "iPhone"
        ),
        SalesReportLine(
            sku: "com.example.pro.monthly", title: "Pro Monthly", productTypeIdentifier: "IAY", units: "1", developerProceeds: "3.50",
            customerPrice: "4.99", customerCurrency: "EUR", proceedsCurrency: "EUR", countryCode: "DE", beginDate: "2024-04-01",
            endDate: "2024-04-01", appleIdentifier: "1500000002", parentIdentifier: "com.example.app", subscription: "New",
            period: "1 Month", device: "iPad"
        ),
        SalesReportLine(
            sku: "com.example.coins100", title: "100 Coins", productTypeIdentifier: "IA1", units: "-1", developerProceeds: "0.70",
            customerPrice: "-0.99", customerCurrency: "USD", proceedsCurrency: "USD", countryCode: "US", beginDate: "2024-04-01",
            endDate: "2024-04-01", appleIdentifier: "1500000001", parentIdentifier: "com.example.app", device: "iPhone"
        ),
        SalesReportLine(
            sku: "com.example.coins100", title: "100 Coins", productTypeIdentifier: "FI1", units: "2", developerProceeds: "0.42",
            customerPrice: "0.69", customerCurrency: "GBP", proceedsCurrency: "GBP", countryCode: "GB", beginDate: "2024-04-01",
            endDate: "2024-04-01", appleIdentifier: "1500000001", parentIdentifier: "com.example.app", device: "Desktop"
        ),
    ]

    /// The report's bytes: cells joined by tabs, each line ended by `lineEnd`.
    static func tsv(_ rows: [[String]], lineEnd: String = "\n") -> Data {
        Data(rows.map { $0.joined(separator: "\t") + lineEnd }.joined().utf8)
    }

    /// The version 1_0 report.
    static var report1_0: Data { tsv([header1_0] + rows1_0) }

    /// The version 1_0 report with one cell changed (`row` 0 is line 2).
    static func report1_0(row: Int, _ column: String, _ value: String) -> Data {
        var rows = rows1_0
        rows[row][header1_0.firstIndex(of: column)!] = value
        return tsv([header1_0] + rows)
    }
}

@Suite struct SalesReportParserTests {
    private func refusal(_ data: Data, reportDate: String? = nil) throws -> SalesReportError {
        try #require(throws: SalesReportError.self) { try SalesReportParser.parse(data, reportDate: reportDate) }
    }

    // MARK: Versions and lines

    @Test func readsTheInAppPurchaseLinesOfAVersion1_0Report() throws {
        let file = try SalesReportParser.parse(Fixture.report1_0)
        #expect(file.reportDate == "2024-04-01")
        #expect(file.columns == Fixture.header1_0)
        #expect(file.lines == Fixture.expected)
        #expect(file.otherLines == 2)
    }

    @Test func readsAVersion1_4ReportWithColumnsInAnotherOrderToTheSameLines() throws {
        let old = try SalesReportParser.parse(Fixture.report1_0)
        let new = try SalesReportParser.parse(Fixture.tsv([Fixture.header1_4] + Fixture.rows1_4))
        #expect(new.lines == old.lines)
        #expect(new.lines == Fixture.expected)
        #expect(new.otherLines == 2)
        #expect(new.reportDate == "2024-04-01")
        #expect(new.columns == Fixture.header1_4)
    }

    @Test func readsProceedsReasonOrderTypeAndPromoCodeWhenFilledAndNilWhenEmpty() throws {
        var row = Fixture.rows1_4[1]
        row[Fixture.header1_4.firstIndex(of: "Proceeds Reason")!] = "Rate After One Year"
        row[Fixture.header1_4.firstIndex(of: "Order Type")!] = "Pre-order"
        row[Fixture.header1_4.firstIndex(of: "Promo Code")!] = "SPRING24"
        let file = try SalesReportParser.parse(Fixture.tsv([Fixture.header1_4, row, Fixture.rows1_4[0]]))
        #expect(file.lines[0].proceedsReason == "Rate After One Year")
        #expect(file.lines[0].orderType == "Pre-order")
        #expect(file.lines[0].promoCode == "SPRING24")
        #expect(file.lines[1].proceedsReason == nil)
        #expect(file.lines[1].orderType == nil)
        #expect(file.lines[1].subscription == nil)
    }

    @Test func countsAppDownloadsAndUpdatesWithoutKeepingThem() throws {
        let file = try SalesReportParser.parse(Fixture.report1_0)
        #expect(file.lines.map(\.productTypeIdentifier) == ["IA1", "IAY", "IA1", "FI1"])
        #expect(file.otherLines == 2)

        let appsOnly = try SalesReportParser.parse(Fixture.tsv([Fixture.header1_0, Fixture.rows1_0[3], Fixture.rows1_0[4]]))
        #expect(appsOnly.lines.isEmpty)
        #expect(appsOnly.otherLines == 2)
        #expect(appsOnly.reportDate == "2024-04-01", "other lines still tell the day")
    }

    @Test func keepsRefundsAsAppleWritesThemNegativeUnitsAndPricePositiveProceeds() throws {
        let refund = try SalesReportParser.parse(Fixture.report1_0).lines[2]
        #expect(refund.units == "-1")
        #expect(refund.customerPrice == "-0.99")
        #expect(refund.developerProceeds == "0.70")
    }

    @Test func validatesOtherLinesToo() throws {
        let error = try refusal(Fixture.report1_0(row: 3, "Units", "lots"))
        #expect(error.line == 5)
        #expect(error.column == 8)
        #expect(error.code == .badValue)
    }

    // MARK: Text forms

    @Test func acceptsAByteOrderMarkCRLFSpacesAroundNamesAndBlankLines() throws {
        let header = Fixture.header1_0.map { " \($0) " }
        var text = "\u{FEFF}" + header.joined(separator: "\t") + "\r\n"
        text += Fixture.rows1_0[0].joined(separator: "\t") + "\r\n\r\n"
        text += Fixture.rows1_0[1].joined(separator: "\t") + "\r\n\n\n"
        let file = try SalesReportParser.parse(Data(text.utf8))
        #expect(file.columns == Fixture.header1_0)
        #expect(file.lines == Array(Fixture.expected[0...1]))
    }

    @Test func countsBlankLinesInTheLineNumbers() throws {
        var rows = Fixture.rows1_0
        rows[1][Fixture.header1_0.firstIndex(of: "Units")!] = "abc"
        var text = Fixture.header1_0.joined(separator: "\t") + "\n"
        text += rows[0].joined(separator: "\t") + "\n\n"
        text += rows[1].joined(separator: "\t") + "\n"
        let error = try refusal(Data(text.utf8))
        #expect(error.line == 4)
        #expect(error.message == "line 4, column 8 (Units): 'abc' is not a number; Apple writes numbers like 1, -1, 0.99 or .70")
    }

    @Test(arguments: [
        (".70", "0.70"), ("-.5", "-0.5"), ("1", "1"), ("-1", "-1"), ("1.00", "1.00"), ("-0.99", "-0.99"), ("0", "0"),
        ("007.10", "7.10"), ("-0.00", "0.00"), ("-0", "0"), ("123456789012345.67", "123456789012345.67"),
    ])
    func normalisesDecimalsToALeadingZeroKeepingTheirDecimals(text: String, canonical: String) {
        #expect(SalesReportParser.normalisedDecimal(text) == canonical)
    }

    @Test(arguments: ["", "-", ".", "1.", "+1", "1..2", "1.2.3", "1e3", "NaN", "inf", "0x10", "1 000", "--1", "١", "1-"])
    func refusesWhatIsNotAPlainDecimal(text: String) {
        #expect(SalesReportParser.normalisedDecimal(text) == nil)
    }

    @Test func readsUnitsWrittenWithDecimalsAsWholeNumbers() throws {
        let file = try SalesReportParser.parse(Fixture.report1_0(row: 0, "Units", "3.00"))
        #expect(file.lines[0].units == "3")
        let refund = try SalesReportParser.parse(Fixture.report1_0(row: 2, "Units", "-1.00"))
        #expect(refund.lines[2].units == "-1")
    }

    @Test(arguments: [
        ("04/01/2024", "2024-04-01"), ("2024-04-01", "2024-04-01"), ("4/1/2024", "2024-04-01"), ("02/29/2024", "2024-02-29"),
        ("12/31/1999", "1999-12-31"), ("02/29/2000", "2000-02-29"),
    ])
    func readsDatesAsAppleWritesThemOrAsISO(text: String, day: String) {
        #expect(SalesReportParser.normalisedDate(text) == day)
    }

    @Test(arguments: [
        "02/29/2023", "02/30/2024", "13/01/2024", "00/10/2024", "04/31/2024", "02/29/1900", "2024-4-1", "2024/04/01", "04-01-2024",
        "04/01/24", "", "yesterday", "2024-04-01T00:00:00Z", "04/01/0000",
    ])
    func refusesWhatIsNotACalendarDay(text: String) {
        #expect(SalesReportParser.normalisedDate(text) == nil)
    }

    @Test func readsISODatesInTheFile() throws {
        var rows = Fixture.rows1_0
        for row in rows.indices {
            rows[row][Fixture.header1_0.firstIndex(of: "Begin Date")!] = "2024-04-01"
            rows[row][Fixture.header1_0.firstIndex(of: "End Date")!] = "2024-04-01"
        }
        let file = try SalesReportParser.parse(Fixture.tsv([Fixture.header1_0] + rows))
        #expect(file.lines == Fixture.expected)
    }

    // MARK: Gzip

    @Test func readsAGzipReportAsItsText() throws {
        let gzip = Gzip.compress(Fixture.report1_0)
        #expect(Gzip.isGzip(gzip))
        #expect(!Gzip.isGzip(Fixture.report1_0))
        let file = try SalesReportParser.parse(gzip)
        #expect(file == (try SalesReportParser.parse(Fixture.report1_0)))
        #expect(file.lines == Fixture.expected)
    }

    @Test func readsEveryMemberOfAMultiMemberGzip() throws {
        let text = Fixture.report1_0
        let half = text.count / 2
        let gzip = Gzip.compress(text.prefix(half)) + Gzip.compress(text.dropFirst(half))
        #expect(try Gzip.decompress(gzip, limit: 1 << 20) == text)
        #expect(try SalesReportParser.parse(gzip).lines == Fixture.expected)
    }

    @Test func refusesATruncatedGzip() throws {
        let gzip = Gzip.compress(Fixture.report1_0)
        for cut in [1, 8, gzip.count / 2, gzip.count - 10] {
            let error = try refusal(gzip.prefix(gzip.count - cut))
            #expect(error.code == .unreadable, "cut \(cut)")
            #expect(error.message.contains("truncated"), "cut \(cut): \(error.message)")
            #expect(error.line == nil)
        }
    }

    @Test func refusesACorruptGzip() throws {
        var gzip = Gzip.compress(Fixture.report1_0)
        gzip[gzip.count - 6] ^= 0xFF // in the CRC-32 trailer
        let error = try refusal(gzip)
        #expect(error.code == .unreadable)
        #expect(error.message.contains("corrupt"))
        #expect(error.message.contains("download the report again"))
    }

    @Test func refusesAGzipThatInflatesPastTheLimit() throws {
        let text = Data(repeating: UInt8(ascii: "a"), count: 300_000)
        let gzip = Gzip.compress(text)
        #expect(try Gzip.decompress(gzip, limit: text.count) == text, "exactly the limit is allowed")
        let error = try #require(throws: SalesReportError.self) { try Gzip.decompress(gzip, limit: text.count - 1) }
        #expect(error.code == .tooLarge)
        #expect(error.message.contains("more than 299999 bytes"))
    }

    // MARK: Refused lines and fields

    /// (line 2 + row, column name, bad value, the column's 1-based index, what the message says)
    @Test(arguments: [
        (0, "Units", "abc", 8, "'abc' is not a number"),
        (1, "Units", "1.5", 8, "'1.5' is not a whole number of units"),
        (2, "Customer Price", "1,000", 16, "'1,000' has a comma"),
        (0, "Developer Proceeds", "1e2", 9, "'1e2' is not a number"),
        (1, "Developer Proceeds", "NaN", 9, "'NaN' is not a number"),
        (3, "Begin Date", "02/30/2024", 10, "'02/30/2024' is not a calendar date"),
        (4, "End Date", "2024-13-01", 11, "'2024-13-01' is not a calendar date"),
        (0, "Customer Currency", "usd", 12, "'usd' is not a currency code"),
        (5, "Currency of Proceeds", "GB", 14, "'GB' is not a currency code"),
        (1, "Country Code", "DEU", 13, "'DEU' is not a country code"),
        (0, "SKU", "", 3, "the field is empty"),
        (2, "Product Type Identifier", "", 7, "the field is empty"),
        (2, "Apple Identifier", "", 15, "the field is empty"),
    ])
    func namesTheLineAndColumnOfABadField(row: Int, column: String, value: String, index: Int, problem: String) throws {
        let error = try refusal(Fixture.report1_0(row: row, column, value))
        #expect(error.code == .badValue)
        #expect(error.line == row + 2)
        #expect(error.column == index)
        #expect(error.columnName == column)
        #expect(error.message.hasPrefix("line \(row + 2), column \(index) (\(column)): \(problem)"), "\(error.message)")
    }

    @Test func refusesALineWithAnotherNumberOfFields() throws {
        var rows = Fixture.rows1_0
        rows[2].removeLast()
        let short = try refusal(Fixture.tsv([Fixture.header1_0] + rows))
        #expect(short.code == .badLine)
        #expect(short.line == 4)
        #expect(short.column == nil)
        #expect(short.message == "line 4: the line has 23 tab-separated fields but the header has 24 columns; the file is damaged or not one report")

        rows = Fixture.rows1_0
        rows[0].append("extra")
        let long = try refusal(Fixture.tsv([Fixture.header1_0] + rows))
        #expect(long.line == 2)
        #expect(long.message.contains("25 tab-separated fields but the header has 24"))
    }

    @Test func refusesAFieldLongerThan4000Characters() throws {
        let fine = try SalesReportParser.parse(Fixture.report1_0(row: 0, "Title", String(repeating: "é", count: 4000)))
        #expect(fine.lines[0].title.count == 4000)

        let error = try refusal(Fixture.report1_0(row: 1, "Developer", String(repeating: "x", count: 4001)))
        #expect(error.code == .tooLarge)
        #expect(error.line == 3)
        #expect(error.column == 4)
        #expect(error.message.hasPrefix("line 3, column 4 (Developer): the field has 4001 characters"))
    }

    @Test func refusesTextThatIsNotUTF8() throws {
        var data = Fixture.report1_0(row: 1, "Title", "TITLE")
        let title = try #require(data.range(of: Data("TITLE".utf8)))
        data.replaceSubrange(title, with: [UInt8(ascii: "P"), 0xFF, UInt8(ascii: "o")]) // Latin-1, say, not UTF-8
        let error = try refusal(data)
        #expect(error.code == .unreadable)
        #expect(error.line == 3)
        #expect(error.message.contains("not UTF-8"))
    }

    // MARK: Refused headers

    @Test func refusesAHeaderWithoutARequiredColumn() throws {
        var header = Fixture.header1_0
        header[header.firstIndex(of: "Units")!] = "Quantity"
        let error = try refusal(Fixture.tsv([header] + Fixture.rows1_0))
        #expect(error.code == .badHeader)
        #expect(error.line == 1)
        #expect(error.columnName == "Units")
        #expect(error.message.hasPrefix("line 1: the header has no column 'Units'; give Apple's Summary Sales Report"))

        let notAReport = try refusal(Data("Date\tAmount\n2024-04-01\t1\n".utf8))
        #expect(notAReport.message.contains("'SKU', 'Title', 'Product Type Identifier', 'Units'"))
    }

    @Test func refusesAColumnNamedTwice() throws {
        var header = Fixture.header1_0
        header[header.firstIndex(of: "Category")!] = "Units"
        let error = try refusal(Fixture.tsv([header] + Fixture.rows1_0))
        #expect(error.code == .badHeader)
        #expect(error.line == 1)
        #expect(error.column == 21)
        #expect(error.message == "line 1, column 21 (Units): the column is named 'Units' like column 8; the header must name each column once")
    }

    @Test func refusesAnEmptyFile() throws {
        for text in ["", "\n\n", "\r\n"] {
            let error = try refusal(Data(text.utf8))
            #expect(error.code == .badHeader)
            #expect(error.message.contains("the file is empty"))
        }
    }

    // MARK: One day

    @Test func refusesALineCoveringMoreThanOneDay() throws {
        let error = try refusal(Fixture.report1_0(row: 1, "End Date", "04/07/2024"))
        #expect(error.code == .notOneDay)
        #expect(error.line == 3)
        #expect(error.message.contains("2024-04-01 to 2024-04-07"))
        #expect(error.message.contains("DAILY"))
    }

    @Test func refusesAReportOfSeveralDaysNamingThem() throws {
        var rows = Fixture.rows1_0
        for (row, day) in [(3, "04/02/2024"), (5, "03/31/2024")] {
            rows[row][Fixture.header1_0.firstIndex(of: "Begin Date")!] = day
            rows[row][Fixture.header1_0.firstIndex(of: "End Date")!] = day
        }
        let error = try refusal(Fixture.tsv([Fixture.header1_0] + rows))
        #expect(error.code == .notOneDay)
        #expect(error.line == 5, "the first line of a second day")
        #expect(error.message == "line 5: the report's lines are of 3 days (2024-03-31, 2024-04-01, 2024-04-02); "
            + "the ledger imports Apple's DAILY Summary Sales Report, one day per file")
    }

    @Test func readsTheLinesOfTheDayGivenAndRefusesAnotherDay() throws {
        #expect(try SalesReportParser.parse(Fixture.report1_0, reportDate: "2024-04-01").lines == Fixture.expected)
        #expect(try SalesReportParser.parse(Fixture.report1_0, reportDate: "04/01/2024").reportDate == "2024-04-01")

        let error = try refusal(Fixture.report1_0, reportDate: "2024-04-02")
        #expect(error.code == .notOneDay)
        #expect(error.line == 2)
        #expect(error.message == "line 2: the line is of 2024-04-01, not of 2024-04-02 as given; import each day's report with its own date")

        let badDate = try refusal(Fixture.report1_0, reportDate: "2024-02-30")
        #expect(badDate.code == .badValue)
        #expect(badDate.line == nil)
    }

    @Test func readsAHeaderOnlyReportOnlyWithItsDay() throws {
        let headerOnly = Fixture.tsv([Fixture.header1_4])
        let file = try SalesReportParser.parse(headerOnly, reportDate: "2024-04-01")
        #expect(file == SalesReportFile(reportDate: "2024-04-01", columns: Fixture.header1_4, lines: [], otherLines: 0))

        let error = try refusal(headerOnly)
        #expect(error.code == .dayUnknown)
        #expect(error.message.hasPrefix("the report has no lines, so its day is unknown: give it"))
        #expect(try SalesReportParser.parse(Gzip.compress(headerOnly), reportDate: "2024-04-01") == file)
    }
}
