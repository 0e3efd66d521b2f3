import AppStoreSimulator
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import NIOHTTP1
import Testing

/// `appAccountToken`s route notifications only through bindings the app's server made, and only
/// after the device's own post had its chance; notifications no user takes expire into a list.
@Suite struct TokenBindingTests {
    static let app = APIHarness.app

    static func bind(_ api: APIHarness, _ user: String, _ token: String) async throws -> APIHarness.Answer {
        try await api.send(.PUT, "/v1/apps/\(app)/users/\(user)/app-account-tokens/\(token)", key: api.keys["ingest"])
    }

    /// A one-time charge as Apple signs it, carrying `token`, and Apple's ONE_TIME_CHARGE about it.
    static func charge(_ signed: SignedPayloadRoutesTests.Signed, _ id: String, product: String, price: Int64, token: String?)
        throws -> (transaction: String, notification: String)
    {
        let transaction = try signed.transaction(id, product: product, type: .nonConsumable, at: Date().addingTimeInterval(-30), price: price,
                                                 token: token)
        return (transaction, try signed.notification("ONE_TIME_CHARGE", transaction: transaction))
    }

    static func waitingNotifications(_ api: APIHarness) -> WaitingNotifications {
        PostgresLedger(client: api.client, logger: APIHarness.logger).waitingNotifications
    }

    static func owned(_ api: APIHarness, _ user: String, after position: Int) async throws -> [String] {
        let read = try await api.send(.GET, "/v1/apps/\(app)/users/\(user)/entitlements?minPosition=\(position)", key: api.keys["read"])
        return (read.json["owned"] as? [[String: Any]] ?? []).compactMap { $0["productId"] as? String }
    }

    @Test func aTokenLearnedFromAnotherUserDoesNotTakeTheirPurchase() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("sticker", type: "non_consumable", prices: ["USD": "0.99"])
            try await api.defineProduct("premium", type: "non_consumable", prices: ["USD": "49.99"])
            let victimToken = UUID().uuidString.lowercased()
            #expect(try await Self.bind(api, "vic", victimToken).status == 201)
            // mallory learned vic's token and buys a sticker with it, posting it as mallory.
            let cheap = try Self.charge(signed, "2000000000310001", product: "sticker", price: 990, token: victimToken)
            let stolen = try await api.postTransaction("mallory", device: "phone", cheap.transaction)
            #expect(stolen.status == 200, "\(stolen.text)")
            // vic buys premium; Apple's notification comes before vic's device posts (the usual order).
            let premium = try Self.charge(signed, "2000000000310002", product: "premium", price: 49_990, token: victimToken)
            let notified = try await api.postNotification(premium.notification)
            #expect(notified.status == 200 && notified.json["outcome"] as? String == "waiting", "not mallory's: \(notified.text)")
            #expect(notified.json["userId"] is NSNull, "\(notified.text)")
            // vic's own post takes the purchase and the notification with it.
            let posted = try await api.postTransaction("vic", device: "phone", premium.transaction)
            #expect(posted.status == 200 && posted.kinds.contains("purchase"), "\(posted.text)")
            #expect((posted.json["notRecorded"] as? [Any])?.isEmpty == true, "not held by another user: \(posted.text)")
            #expect(posted.kinds.contains("notification"), "the waiting notification came with it: \(posted.text)")
            #expect(try await Self.owned(api, "mallory", after: posted.position) == ["sticker"])
            #expect(try await Self.owned(api, "vic", after: posted.position) == ["premium"])
        }
    }

    @Test func aTokenIsOneUsersForEverAndCanBeMadeByTheLedger() async throws {
        try await APIHarness.run { api in
            let token = UUID().uuidString
            let first = try await Self.bind(api, "ann", token)
            #expect(first.status == 201 && first.json["appAccountToken"] as? String == token.lowercased() && first.json["bound"] as? Bool == true,
                    "\(first.text)")
            let again = try await Self.bind(api, "ann", token.lowercased())
            #expect(again.status == 200 && again.json["bound"] as? Bool == false && again.json["position"] as? Int == first.json["position"] as? Int)
            let taken = try await Self.bind(api, "bob", token)
            #expect(taken.status == 409 && taken.errorCode == "token_bound_to_another_user", "\(taken.text)")
            let notUUID = try await Self.bind(api, "bob", "not-a-uuid")
            #expect(notUUID.status == 400 && notUUID.errorMessage?.contains("UUID") == true, "\(notUUID.text)")
            let made = try await api.send(.POST, "/v1/apps/\(Self.app)/users/bob/app-account-tokens", key: api.keys["ingest"])
            let madeToken = try #require(made.json["appAccountToken"] as? String, "\(made.text)")
            #expect(made.status == 201 && UUID(uuidString: madeToken) != nil)
            let listed = try await api.send(.GET, "/v1/apps/\(Self.app)/users/bob/app-account-tokens", key: api.keys["read"])
            #expect(listed.json["appAccountTokens"] as? [String] == [madeToken], "\(listed.text)")
            // Only the app's server binds: a read key may not.
            let refused = try await api.send(.PUT, "/v1/apps/\(Self.app)/users/eve/app-account-tokens/\(UUID().uuidString)", key: api.keys["read"])
            #expect(refused.status == 403)
        }
    }

    @Test func aBoundTokensNotificationGoesToItsUserAfterTheGraceUnlessTheDevicePostsFirst() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("premium", type: "non_consumable", prices: ["USD": "49.99"])
            let token = UUID().uuidString.lowercased()
            _ = try await Self.bind(api, "kim", token)
            let sweeper = Self.waitingNotifications(api)
            // Nobody posts: after the grace the bound user gets it.
            let first = try Self.charge(signed, "2000000000310101", product: "premium", price: 49_990, token: token)
            #expect(try await api.postNotification(first.notification).json["outcome"] as? String == "waiting")
            let early = try await sweeper.sweep(now: Date())
            #expect(early.delivered == 0, "within the grace the device may still post it")
            let late = try await sweeper.sweep(now: Date().addingTimeInterval(11 * 60))
            #expect(late.delivered == 1)
            #expect(try await Self.owned(api, "kim", after: try await api.eventCount()) == ["premium"])
            // Another purchase with kim's token, posted by the device of another user within the
            // grace (an app that reuses tokens): the device's post takes it, the sweep leaves it.
            try await api.defineProduct("extra", type: "non_consumable", prices: ["USD": "9.99"])
            let second = try Self.charge(signed, "2000000000310102", product: "extra", price: 9_990, token: token)
            #expect(try await api.postNotification(second.notification).json["outcome"] as? String == "waiting")
            let posted = try await api.postTransaction("lou", device: "tablet", second.transaction)
            #expect(posted.kinds.contains("purchase") && posted.kinds.contains("notification"), "\(posted.text)")
            let after = try await sweeper.sweep(now: Date().addingTimeInterval(11 * 60))
            #expect(after.delivered == 0)
            #expect(try await Self.owned(api, "lou", after: posted.position) == ["extra"])
        }
    }

    @Test func aPostNeverPullsInNotificationsThroughATokenBoundToSomeoneElse() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("premium", type: "non_consumable", prices: ["USD": "49.99"])
            try await api.defineProduct("sticker", type: "non_consumable", prices: ["USD": "0.99"])
            let token = UUID().uuidString.lowercased()
            _ = try await Self.bind(api, "kim", token)
            let premium = try Self.charge(signed, "2000000000310201", product: "premium", price: 49_990, token: token)
            #expect(try await api.postNotification(premium.notification).json["outcome"] as? String == "waiting")
            // mallory posts her own purchase carrying kim's token: kim's waiting notification stays.
            let cheap = try Self.charge(signed, "2000000000310202", product: "sticker", price: 990, token: token)
            let posted = try await api.postTransaction("mallory", device: "phone", cheap.transaction)
            #expect(!posted.recorded.contains { $0["kind"] as? String == "notification" }, "\(posted.text)")
            let waiting = try await api.send(.GET, "/v1/apps/\(Self.app)/notifications/unclaimed", key: api.keys["admin"])
            #expect((waiting.json["notifications"] as? [[String: Any]])?.map { $0["transactionId"] as? String } == ["2000000000310201"],
                    "\(waiting.text)")
            // kim's own post of anything carrying her token takes it.
            let own = try Self.charge(signed, "2000000000310203", product: "sticker", price: 990, token: token)
            let kims = try await api.postTransaction("kim", device: "phone", own.transaction)
            #expect(kims.recorded.contains { $0["kind"] as? String == "notification" && $0["transactionId"] as? String == "2000000000310201" },
                    "\(kims.text)")
        }
    }

    @Test func notificationsNoUserTakesExpireIntoAListAndAreStillTakenByTheirPost() async throws {
        try await SignedPayloadRoutesTests.run { api, signed in
            try await api.defineProduct("premium", type: "non_consumable", prices: ["USD": "49.99"])
            let orphan = try Self.charge(signed, "2000000000310301", product: "premium", price: 49_990, token: nil)
            let notified = try await api.postNotification(orphan.notification)
            #expect(notified.json["outcome"] as? String == "waiting")
            let sweeper = Self.waitingNotifications(api)
            #expect(try await sweeper.sweep(now: Date().addingTimeInterval(29 * 86_400)).expired == 0)
            #expect(try await sweeper.sweep(now: Date().addingTimeInterval(31 * 86_400)).expired == 1)
            #expect(try await sweeper.sweep(now: Date().addingTimeInterval(32 * 86_400)).expired == 0, "once")
            let expired = try await api.send(.GET, "/v1/apps/\(Self.app)/notifications/unclaimed?state=expired", key: api.keys["admin"])
            let listed = try #require((expired.json["notifications"] as? [[String: Any]])?.first, "\(expired.text)")
            #expect(listed["notificationUUID"] as? String == notified.json["notificationUUID"] as? String && listed["expiredAt"] is String)
            let waiting = try await api.send(.GET, "/v1/apps/\(Self.app)/notifications/unclaimed", key: api.keys["admin"])
            #expect((waiting.json["notifications"] as? [Any])?.isEmpty == true, "\(waiting.text)")
            // The operator's list says the same.
            let cli = try await CommandLineTests.ledger(["notifications", "list", "--app", Self.app, "--expired"], database: api.settings)
            #expect(cli.status == 0 && cli.output.contains("ONE_TIME_CHARGE") && cli.output.contains("2000000000310301"), "\(cli.output)\(cli.errors)")
            // Nothing Apple sent is lost: the purchase's post still takes it.
            let posted = try await api.postTransaction("zoe", device: "phone", orphan.transaction)
            #expect(posted.kinds.contains("notification"), "\(posted.text)")
            let bad = try await api.send(.GET, "/v1/apps/\(Self.app)/notifications/unclaimed?state=lost", key: api.keys["admin"])
            #expect(bad.status == 400)
        }
    }
}
