import Foundation
import LedgerDomain
@testable import LedgerHTTP
import Testing

/// The entitlements read writes its JSON by hand for speed; it must be the bytes the API's
/// encoder writes for every other answer.
@Suite("The hand-written entitlements JSON is the encoder's, byte for byte")
struct EntitlementsBodyJSONTests {
    /// Strings a user id or product id may hold: quotes, backslashes, control characters,
    /// slashes, non-ASCII, and plain ones.
    static let awkward = ["alice", "a\"b", "back\\slash", "tab\tnew\nline\rcr", "bell\u{07}\u{1F}", "slash/ok", "ünïcødé ✓ 🎉", "", "\u{08}\u{0C}"]

    static func body(_ text: String, at instant: Date) -> EntitlementsBody {
        let start = Date(timeIntervalSince1970: 1_700_000_000.123)
        let entitlements = Entitlements(
            at: instant,
            owned: [Entitlements.Owned(productId: text, productType: .nonConsumable, originalTransactionId: "1000\(text)", ownedSince: start)],
            periods: [
                SubscriptionPeriod(transactionId: "t1", productId: "pro.monthly", group: text, kind: .autoRenewable,
                                   start: start, end: start.addingTimeInterval(30 * 86_400)),
                SubscriptionPeriod(transactionId: "t2", productId: text, group: "gold", kind: .nonRenewing,
                                   start: start.addingTimeInterval(-90 * 86_400), end: start.addingTimeInterval(-60 * 86_400)),
            ],
            balances: [ConsumableBalance(productId: text, purchased: 5, consumed: 7)]
        )
        return EntitlementsBody(userId: text, position: 42, entitlements)
    }

    @Test("every awkward string, active and lapsed periods, an overdrawn balance", arguments: awkward)
    func sameBytes(_ text: String) throws {
        for instant in [Date(timeIntervalSince1970: 1_700_000_500), Date(timeIntervalSince1970: 1_800_000_000)] {
            let body = Self.body(text, at: instant)
            let expected = try APIJSON.makeEncoder().encode(body)
            #expect(body.json() == expected, "\(String(decoding: body.json(), as: UTF8.self)) vs \(String(decoding: expected, as: UTF8.self))")
        }
    }

    @Test("a user with nothing")
    func emptyBody() throws {
        let body = EntitlementsBody(userId: "nobody", position: 0, Entitlements(at: Date(timeIntervalSince1970: 0), owned: [], periods: [], balances: []))
        #expect(body.json() == (try APIJSON.makeEncoder().encode(body)))
    }
}
