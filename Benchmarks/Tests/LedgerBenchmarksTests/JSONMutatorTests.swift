import Foundation
@testable import LedgerBenchmarks
import Testing

@Suite struct JSONMutatorTests {
    static let seedBody = FuzzJSON.keyed([
        "userId": .string("ann"), "deviceId": .string("phone"), "receiptData": .string("ZXhhbXBsZQ=="),
        "quantity": .number("1"), "nested": .keyed(["list": .array([.bool(true), .null, .number("-2.5e3")])]),
    ])

    @Test func theSameSeedAndCaseGiveTheSameBodyAndOtherCasesOthers() {
        let mutator = JSONMutator(donors: [Self.seedBody])
        func body(seed: UInt64, index: Int) -> Data {
            var random = FuzzRandom(seed: seed, case: index)
            return mutator.mutate(Self.seedBody, random: &random).body
        }
        for index in 0..<200 {
            #expect(body(seed: 7, index: index) == body(seed: 7, index: index))
        }
        let bodies = (0..<200).map { body(seed: 7, index: $0) }
        #expect(Set(bodies).count > 150, "cases differ: \(Set(bodies).count) distinct bodies of 200")
        // A few mutations can land where they started (keys shuffled into their own order).
        #expect(bodies.filter { $0 == Self.seedBody.data }.count <= 4, "nearly every case changes the body")
        #expect(Set((0..<50).map { body(seed: 8, index: $0) }) != Set((0..<50).map { body(seed: 7, index: $0) }))
    }

    @Test func bodiesAreReadWithTheirKeyOrderAndNumberTextAndWrittenBackAsTheyCame() throws {
        let text = #"{"b":1,"a":[true,null,-2.5e3,"x\"y\\z\u0001é😀"],"b":{}}"#
        let value = try #require(FuzzJSON(data: Data(text.utf8)))
        #expect(value.text == text)
        #expect(FuzzJSON(data: Data("{\"a\":".utf8)) == nil)
        // What Foundation reads back from the written text is the same value.
        let written = try JSONSerialization.jsonObject(with: Self.seedBody.data) as? [String: Any]
        #expect(written?["userId"] as? String == "ann")
        #expect((written?["nested"] as? [String: Any])?["list"] as? [Any] != nil)
    }

    @Test func mutationsCoverTheKindsABrokenClientSends() {
        let mutator = JSONMutator(donors: [Self.seedBody])
        var steps: [String] = []
        var invalidJSON = 0
        for index in 0..<2_000 {
            var random = FuzzRandom(seed: 1, case: index)
            let (body, applied) = mutator.mutate(Self.seedBody, random: &random)
            steps += applied
            if (try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed])) == nil { invalidJSON += 1 }
        }
        for kind in ["drop ", "rename ", "repeat key ", "add key ", "change the type ", "replace ", "nest ", "edit the text ",
                     "flip a bit", "cut the body", "splice "] {
            #expect(steps.contains { $0.hasPrefix(kind) }, "some mutation does \(kind)")
        }
        #expect(invalidJSON > 200, "some bodies are not JSON at all (\(invalidJSON) of 2,000)")
        #expect(invalidJSON < 1_800, "most stay JSON, to reach past the reader (\(invalidJSON) of 2,000 are not)")
    }

    /// Repetitions compound within a case (70,000 emoji, 400 times, 400 times again asked for
    /// 45 GB and ended a 100,000-case run): every part stays under `JSONMutator.largestPart`.
    @Test func bodiesStayWithinWhatAMachineCanHold() {
        let long = FuzzJSON.keyed(["receiptData": .string(String(repeating: "\u{1F600}", count: 70_000)), "list": .array([.string("x")])])
        let mutator = JSONMutator(donors: [long])
        var largest = 0
        for index in 0..<300 {
            var random = FuzzRandom(seed: 3, case: index)
            largest = max(largest, mutator.mutate(long, random: &random).body.count)
        }
        #expect(largest < 4 * JSONMutator.largestPart, "the largest body has \(largest) bytes")
    }
}
