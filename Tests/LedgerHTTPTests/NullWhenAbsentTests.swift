import Foundation
import LedgerDomain
@testable import LedgerHTTP
import Testing

@Suite("Answers write absent optional fields as null, so every answer of a route has the same keys")
struct NullWhenAbsentTests {
    struct Answer: Encodable {
        let id: String
        @NullWhenAbsent var note: String?
        @NullWhenAbsent var at: Date?
        let plain: Int?
    }

    @Test("absent: the key with null; present: the value, dates as the API writes them; a plain optional is left out")
    func absentIsNull() throws {
        let absent = String(decoding: try APIJSON.makeEncoder().encode(Answer(id: "a", note: nil, at: nil, plain: nil)), as: UTF8.self)
        #expect(absent == #"{"at":null,"id":"a","note":null}"#)
        let present = String(decoding: try APIJSON.makeEncoder().encode(
            Answer(id: "b", note: "n", at: Date(timeIntervalSince1970: 1_767_225_600), plain: 3)
        ), as: UTF8.self)
        #expect(present == #"{"at":"2026-01-01T00:00:00.000Z","id":"b","note":"n","plain":3}"#)
    }
}
