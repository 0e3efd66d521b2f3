import Foundation
@testable import LedgerDomain
import LedgerDomainTesting
import Testing

/// The stored timestamp text, written without a formatter, is Foundation's text to the byte: the
/// log's JSON, its hashes and every projection's rows depend on it.
@Suite struct TimestampFormatTests {
    static let edges: [Int64] = [
        LedgerJSON.civilMilliseconds.lowerBound, LedgerJSON.civilMilliseconds.upperBound, 0, -1, 1, 999, 1000,
        951_782_400_000,  // 2000-02-29
        4_107_542_400_000,  // 2100-03-01
        1_767_225_599_999, 1_767_225_600_000,  // the last instant of 2025, the first of 2026
    ]

    @Test("formatted by hand as Foundation formats, at the edges and at 100,000 random instants from 1583 to 9999")
    func sameTextAsFoundation() {
        var random = SeededGenerator(seed: 20_261_123)
        let span = UInt64(LedgerJSON.civilMilliseconds.upperBound - LedgerJSON.civilMilliseconds.lowerBound)
        let instants = Self.edges + (0..<100_000).map { _ in LedgerJSON.civilMilliseconds.lowerBound + Int64(random.next() % span) }
        var differing: [(Int64, String, String)] = []
        for milliseconds in instants {
            let fast = LedgerJSON.formatCanonicalTimestamp(milliseconds)
            let foundation = LedgerJSON.formatWithFoundation(milliseconds)
            if fast != foundation { differing.append((milliseconds, fast, foundation)) }
            if differing.isEmpty { #expect(LedgerJSON.parseTimestamp(fast)?.milliseconds == milliseconds) }
        }
        #expect(differing.isEmpty, "\(differing.count) differ, first \(differing.prefix(3))")
        #expect(LedgerJSON.formatTimestamp(Date(milliseconds: 951_782_400_123)) == "2000-02-29T00:00:00.123Z")
    }

    @Test("before 1583 Foundation's text is kept as it was (its calendar is Julian before October 1582)")
    func earlierInstantsKeepFoundationsText() {
        let early = LedgerJSON.civilMilliseconds.lowerBound - 86_400_000 * 400
        #expect(LedgerJSON.formatTimestamp(Date(milliseconds: early)) == LedgerJSON.formatWithFoundation(early))
    }
}
