@testable import AppStore
import Foundation
import Testing

/// Whatever shape Apple signs is read, kept as it came and never hangs: lists of objects (Advanced
/// Commerce's `items`), deep nesting, lists of strings, and the four objects a notification may
/// carry (`data`, `summary`, `externalPurchaseToken`, `appData`).
@Suite struct SignedPayloadShapesTests {
    static func fields(_ json: String) throws -> [String: String] {
        try JSONDecoder().decode(SignedFields.self, from: Data(json.utf8)).values
    }

    @Test("a compact JWS splits at its dots, found among its bytes: every part kept, empty ones too, whatever else the text holds")
    func jwsParts() {
        #expect(SignedPayloadVerifier.parts(of: "aGVhZGVy.cGF5bG9hZA.c2ln") == ["aGVhZGVy", "cGF5bG9hZA", "c2ln"])
        #expect(SignedPayloadVerifier.parts(of: "..") == ["", "", ""])
        #expect(SignedPayloadVerifier.parts(of: "") == [""])
        #expect(SignedPayloadVerifier.parts(of: "a.b") == ["a", "b"])
        #expect(SignedPayloadVerifier.parts(of: "é.\u{301}x.🇫🇷.") == ["é", "\u{301}x", "🇫🇷", ""])
        let jws = "eyJhbGciOiJFUzI1NiJ9.eyJhIjoxfQ.c2lnbmF0dXJl"
        let parts = SignedPayloadVerifier.parts(of: jws)
        // What is signed: the text up to the end of the second part.
        #expect(String(jws[..<parts[1].endIndex]) == "eyJhbGciOiJFUzI1NiJ9.eyJhIjoxfQ")
    }

    @Test("a list of objects is kept whole as canonical JSON; objects flatten under their key")
    func listsOfObjects() throws {
        let values = try Self.fields("""
            {"transactionId":"1","advancedCommerceInfo":{"descriptors":{"displayName":"Premium"},"estimatedTax":1500,
             "items":[{"SKU":"sku.a","price":9990,"refunds":[{"refundAmount":5000,"refundType":"PRORATED"}]},{"SKU":"sku.b","price":0.5}],
             "taxRate":"0.15"}}
            """)
        #expect(values["advancedCommerceInfo.descriptors.displayName"] == "Premium")
        #expect(values["advancedCommerceInfo.estimatedTax"] == "1500" && values["advancedCommerceInfo.taxRate"] == "0.15")
        #expect(values["advancedCommerceInfo.items"]
            == #"[{"SKU":"sku.a","price":9990,"refunds":[{"refundAmount":5000,"refundType":"PRORATED"}]},{"SKU":"sku.b","price":0.5}]"#)
    }

    @Test("a list of plain strings is joined with commas; one whose strings hold commas, or mixed, is kept as JSON")
    func listsOfStrings() throws {
        let values = try Self.fields(#"{"eligibleWinBackOfferIds":["a","b"],"odd":["a,b","c"],"mixed":["a",1,null,true],"empty":[]}"#)
        #expect(values["eligibleWinBackOfferIds"] == "a,b")
        #expect(values["odd"] == #"["a,b","c"]"# && values["mixed"] == #"["a",1,null,true]"#)
        #expect(values["empty"] == "")
    }

    @Test("nesting deeper than the bound is kept as JSON text at the bound, and read at once")
    func deepNesting() throws {
        var object = #"{"leaf":"x"}"#
        for level in 0..<40 { object = #"{"k\#(level)":\#(object)}"# }
        var list = "1"
        for _ in 0..<400 { list = "[\(list)]" }
        let started = ContinuousClock.now
        let values = try Self.fields(#"{"deep":\#(object),"list":\#(list)}"#)
        #expect(ContinuousClock.now - started < .seconds(5))
        let deepest = try #require(values.keys.filter { $0.hasPrefix("deep.") }.max { $0.count < $1.count })
        #expect(deepest.split(separator: ".").count == SignedFields.maximumDepth + 1, "\(deepest)")
        #expect(values[deepest]?.contains(#"{"leaf":"x"}"#) == true)
        #expect(values["list"]?.count == 801)
    }

    @Test("numbers, booleans and nulls as JSON wrote them; nulls are left out")
    func scalars() throws {
        let values = try Self.fields(#"{"price":2970,"purchaseDate":1697679936049.7297,"isUpgraded":true,"revocationDate":null}"#)
        #expect(values["price"] == "2970" && values["isUpgraded"] == "true" && values["revocationDate"] == nil)
        #expect(values["purchaseDate"].flatMap(Double.init) == 1697679936049.7297)
    }

    @Test("a notification's app and environment come from whichever of Apple's objects it carries", arguments: [
        (#"{"data":{"bundleId":"com.a","environment":"Sandbox"}}"#, "com.a", "Sandbox"),
        (#"{"summary":{"bundleId":"com.a","environment":"Production"}}"#, "com.a", "Production"),
        (#"{"appData":{"bundleId":"com.a","environment":"Sandbox","signedAppTransactionInfo":"x.y.z"}}"#, "com.a", "Sandbox"),
        (#"{"externalPurchaseToken":{"bundleId":"com.a","externalPurchaseId":"SANDBOX_b215"}}"#, "com.a", "Sandbox"),
        (#"{"externalPurchaseToken":{"bundleId":"com.a","externalPurchaseId":"b2158121"}}"#, "com.a", "Production"),
    ])
    func notificationApp(_ example: (String, String, String)) throws {
        let body = example.0.dropFirst().dropLast()
        let json = #"{"notificationType":"TEST","notificationUUID":"u","signedDate":1698148900000,"version":"2.0",\#(body)}"#
        let notification = try JSONDecoder().decode(SignedNotification.self, from: Data(json.utf8))
        #expect(notification.payloadBundleId == example.1 && notification.payloadEnvironment == example.2)
    }
}
