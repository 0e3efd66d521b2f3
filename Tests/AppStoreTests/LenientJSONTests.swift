@testable import AppStore
import Foundation
import Testing

@Suite struct LenientJSONTests {
    private func parse(_ text: String) throws -> LenientJSON {
        try #require(LenientJSON(data: Data(text.utf8)))
    }

    @Test func numbersArriveAsStringsOrNumbersAndReadTheSame() throws {
        let json = try parse(#"{"a":"1","b":1,"c":" 12 ","d":"x","e":1.5,"f":1000000012345678}"#)
        #expect(json["a"].int == 1)
        #expect(json["b"].int == 1)
        #expect(json["c"].int == 12)
        #expect(json["d"].int == nil)
        #expect(json["e"].int == nil)
        #expect(json["f"].int64 == 1_000_000_012_345_678)
        #expect(json["f"].string == "1000000012345678")
        #expect(json["b"].string == "1")
    }

    @Test func booleansArriveAsStringsNumbersOrBooleans() throws {
        let json = try parse(#"{"a":"false","b":"true","c":true,"d":false,"e":"1","f":0,"g":"maybe"}"#)
        #expect(json["a"].bool == false)
        #expect(json["b"].bool == true)
        #expect(json["c"].bool == true)
        #expect(json["d"].bool == false)
        #expect(json["e"].bool == true)
        #expect(json["f"].bool == false)
        #expect(json["g"].bool == nil)
        #expect(json["c"].string == "true")
        #expect(json["c"].int == nil, "a JSON boolean is not the number 1")
    }

    @Test func missingNullAndEmptyValuesReadAsAbsent() throws {
        let json = try parse(#"{"a":null,"b":"","c":{}}"#)
        #expect(json["a"].isPresent == false)
        #expect(json["a"].string == nil)
        #expect(json["b"].string == nil)
        #expect(json["missing"]["deeper"].string == nil)
        #expect(json["c"].object?.isEmpty == true)
        #expect(json["c"].array == nil)
    }

    @Test func notJSONIsRefused() {
        #expect(LenientJSON(data: Data("<html>".utf8)) == nil)
    }
}
