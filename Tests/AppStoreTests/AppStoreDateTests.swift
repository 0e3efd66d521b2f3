@testable import AppStore
import Foundation
import LedgerDomain
import Testing

@Suite struct AppStoreDateTests {
    /// 2013-01-01T00:00:00Z
    let newYear2013 = Date(timeIntervalSince1970: 1_356_998_400)

    @Test func readsGMTText() {
        #expect(AppStoreDate.parse("2013-01-01 00:00:00 Etc/GMT") == newYear2013)
    }

    @Test func readsPacificTextAsTheSameInstant() {
        #expect(AppStoreDate.parse("2012-12-31 16:00:00 America/Los_Angeles") == newYear2013)
        // Summer time: UTC-7.
        #expect(AppStoreDate.parse("2013-07-01 05:00:00 America/Los_Angeles") == Date(timeIntervalSince1970: 1_372_680_000))
    }

    @Test func readsEpochMillisecondsText() {
        #expect(AppStoreDate.parse("1356998400000") == newYear2013)
        #expect(AppStoreDate.parse("1356998400123")?.milliseconds == 1_356_998_400_123)
    }

    @Test func readsISO8601() {
        #expect(AppStoreDate.parse("2013-01-01T00:00:00Z") == newYear2013)
        #expect(AppStoreDate.parse("2013-01-01T01:00:00+01:00") == newYear2013)
        #expect(AppStoreDate.parse("2013-01-01T00:00:00.250Z")?.milliseconds == 1_356_998_400_250)
    }

    @Test func readsZoneAbbreviationsAndOffsets() {
        #expect(AppStoreDate.parse("2013-01-01 00:00:00 GMT") == newYear2013)
        #expect(AppStoreDate.parse("2013-01-01 00:00:00 UTC") == newYear2013)
        #expect(AppStoreDate.parse("2012-12-31 16:00:00 -0800") == newYear2013)
        #expect(AppStoreDate.parse("2013-01-01 00:00:00") == newYear2013, "no zone means UTC")
    }

    @Test func refusesWhatIsNotADate() {
        #expect(AppStoreDate.parse("") == nil)
        #expect(AppStoreDate.parse("yesterday") == nil)
        #expect(AppStoreDate.parse("2013-13-01 00:00:00 Etc/GMT") == nil)
        #expect(AppStoreDate.parse("2013-01-01 00:00:00 Mars/Olympus") == nil)
    }

    @Test func millisecondsWinOverTextAndTextFallsBackToPacific() throws {
        let json = try #require(LenientJSON(data: Data(#"""
            {"a_ms":"1356998400000","a":"1999-01-01 00:00:00 Etc/GMT",
             "b_pst":"2012-12-31 16:00:00 America/Los_Angeles",
             "c":"1356998400000",
             "d_ms":1356998400000}
            """#.utf8)))
        #expect(json.date("a") == newYear2013)
        #expect(json.date("b") == newYear2013)
        #expect(json.date("c") == newYear2013, "old transaction receipts put milliseconds in expires_date")
        #expect(json.date("d") == newYear2013, "milliseconds as a JSON number")
        #expect(json.date("missing") == nil)
    }

    @Test func writesWhatItReads() {
        let date = Date(milliseconds: 1_795_260_050_492)
        #expect(AppStoreDate.gmtText(newYear2013) == "2013-01-01 00:00:00 Etc/GMT")
        #expect(AppStoreDate.pacificText(newYear2013) == "2012-12-31 16:00:00 America/Los_Angeles")
        #expect(AppStoreDate.parse(AppStoreDate.millisecondsText(date)) == date)
        #expect(AppStoreDate.parse(AppStoreDate.pacificText(date))?.milliseconds == date.milliseconds / 1000 * 1000)
    }
}

/// Regressions the fuzzer found (`ledger-bench fuzz`).
@Suite struct AppStoreDateFuzzRegressionTests {
    /// `00:00:1e300` crashed the whole ledger: the seconds were read as a `Double` and made whole
    /// with `Int(_:)`, which traps on values out of range, infinity and NaN. Now they are unreadable.
    @Test func secondsThatAreNotSecondsMakeTheDateUnreadableInsteadOfCrashing() {
        for text in ["2013-01-01 00:00:1e300 Etc/GMT", "2013-01-01 00:00:nan Etc/GMT", "2013-01-01 00:00:inf Etc/GMT",
                     "2013-01-01 00:00:-inf", "2013-01-01 00:00:-1 Etc/GMT", "2013-01-01 00:00:61 Etc/GMT"] {
            #expect(AppStoreDate.parse(text) == nil, "\(text)")
        }
        #expect(AppStoreDate.parse("2013-01-01 00:00:00.5 Etc/GMT") == Date(timeIntervalSince1970: 1_356_998_400.5))
    }

    /// `request_date_ms` of 9223372036854775807 crashed the ledger: the date was taken, and the
    /// event recording the answer traps making its milliseconds an `Int64` again. Past year 9999
    /// the stored time no longer reads back either. Such dates are unreadable now: the answer is
    /// recorded as if they were absent (the text stays in the fields for a later fix).
    @Test func datesTheLedgerCannotRecordAreUnreadableAndTheAnswerIsStillRecorded() throws {
        for text in ["9223372036854775807", "-9223372036854775808", "253402300800000", "+275760-09-13T00:00:00Z"] {
            #expect(AppStoreDate.parse(text) == nil, "\(text)")
        }
        #expect(AppStoreDate.parse("253402300799999")?.milliseconds == 253_402_300_799_999, "9999-12-31T23:59:59.999Z is the last")
        let answer = #"{"status":0,"receipt":{"bundle_id":"com.example.app","request_date_ms":"9223372036854775807","request_date":"2013-01-01 00:00:00 Etc/GMT","in_app":[{"transaction_id":"1","product_id":"coins","quantity":"1","purchase_date_ms":"1356998400000000","purchase_date":"2013-01-01 00:00:00 Etc/GMT","expires_date_ms":"9223372036854775807"}]}}"#
        let receipt = try ReceiptResponseParser(receiptSHA256: "00", answeredBy: .sandbox).read(Data(answer.utf8))
        #expect(receipt.answeredAt == Date(timeIntervalSince1970: 1_356_998_400), "the text is read when the milliseconds cannot be")
        #expect(receipt.transactions.first?.purchaseDate == Date(timeIntervalSince1970: 1_356_998_400))
        #expect(receipt.transactions.first?.expiresDate == nil)
        let decision = try UserDecisions.observeReceipt(
            receipt.appStoreAnswer, app: "com.example.app", deviceId: "phone", digest: AppStoreReceiptVerifier.sha256Hex, on: UserLedger()
        )
        let events = try decision.events.map { try NewEvent($0.event.payload, deduplicationKey: $0.deduplicationKey) }
        let recorded = events.enumerated().map { offset, event in
            RecordedEvent(position: Int64(offset + 1), streamID: "user/com.example.app/u", streamVersion: Int64(offset + 1), eventID: event.eventID,
                          type: event.type.stored, data: event.data, metadata: event.metadata, recordedAt: Date(), deduplicationKey: nil)
        }
        let state = try UserLedger(folding: recorded, catalog: ProductCatalog())
        #expect(state.transactions["1"]?.purchaseDate == Date(timeIntervalSince1970: 1_356_998_400), "the fold reads the same dates")
    }
}

