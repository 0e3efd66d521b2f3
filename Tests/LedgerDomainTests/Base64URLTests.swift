import Foundation
import LedgerDomain
import Testing

@Suite struct Base64URLTests {
    @Test func encodesAsRFC4648SectionFiveWithoutPaddingAndDecodesBack() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<64 {
            let bytes = (0..<length).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
            // The reference: Foundation's base64 with the two characters swapped and the padding dropped.
            let reference = Data(bytes).base64EncodedString().map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }.filter { $0 != "=" }
            let encoded = Base64URL.encode(bytes)
            #expect(encoded == String(reference), "\(length) bytes")
            #expect(Base64URL.decode(encoded) == Data(bytes))
            #expect(Base64URL.decode(encoded + String(repeating: "=", count: (4 - encoded.count % 4) % 4)) == Data(bytes), "padding is optional")
        }
        #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
    }

    @Test func refusesTextOutsideTheAlphabet() {
        for text in ["a+b", "a/b", "ab c", "é", "a.b", "A\n"] {
            #expect(Base64URL.decode(text) == nil, "\(text)")
        }
        #expect(Base64URL.decode("A") == nil, "one character cannot hold a byte")
    }
}
