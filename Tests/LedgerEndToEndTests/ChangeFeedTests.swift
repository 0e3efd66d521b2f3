import AppStoreSimulator
import Foundation
import LedgerDomain
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// `GET /v1/apps/{bundleId}/changes`: what an app's server following the ledger is told, against
/// a real PostgreSQL, with the change writer running as the leading server runs it.
@Suite struct ChangeFeedTests {
    static let app = APIHarness.app

    @Test func aRenewalWithNoDeviceARefundAGracePeriodAndTheirEndsAreToldInLogOrder() async throws {
        try await SignedPayloadRoutesTests.run(followChanges: true) { api, signed in
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M")
            try await api.defineProduct("coins.100", type: "consumable")
            let start = try await api.changes(after: "0")
            #expect(start.changes.isEmpty, "\(start.changes)")
            // Periods end tens of seconds ahead: on a loaded machine a post may take seconds, and each
            // fact must be recorded while the period it is about still runs.
            let t0 = Date()

            // Alice subscribes; the App Store renews her with no device (DID_RENEW), then nothing.
            let ta = Date()
            let first = try signed.transaction("3000000000000001", product: "pro.monthly", type: .autoRenewable,
                                               at: ta.addingTimeInterval(-10), expires: ta.addingTimeInterval(20))
            #expect(try await api.postTransaction("alice", device: "phone", first).status == 200)
            let renewal = try signed.transaction("3000000000000002", original: "3000000000000001", product: "pro.monthly", type: .autoRenewable,
                                                 at: ta.addingTimeInterval(20), expires: ta.addingTimeInterval(30))
            #expect(try await api.postNotification(try signed.notification("DID_RENEW", transaction: renewal)).status == 200)

            // Bob buys three coins, uses one, and Apple refunds the purchase.
            let coins = try signed.transaction("3000000000000010", product: "coins.100", type: .consumable, at: t0.addingTimeInterval(-60), quantity: 3)
            #expect(try await api.postTransaction("bob", device: "phone", coins).status == 200)
            let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/bob/consumptions", key: api.allKey,
                                          json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(used.status == 201, "\(used.text)")
            let refunded = try signed.transaction("3000000000000010", product: "coins.100", type: .consumable, at: t0.addingTimeInterval(-60),
                                                  quantity: 3, revoked: Date())
            #expect(try await api.postNotification(try signed.notification("REFUND", transaction: refunded)).status == 200)

            // Carol's renewal fails to bill; the App Store keeps her access for a grace period.
            let tc = Date()
            let carols = try signed.transaction("3000000000000020", product: "pro.monthly", type: .autoRenewable,
                                                at: tc.addingTimeInterval(-20), expires: tc.addingTimeInterval(20))
            #expect(try await api.postTransaction("carol", device: "pad", carols).status == 200)
            let graceEnds = tc.addingTimeInterval(30)
            let info = try signed.signer.sign(SimulatorSignedPayloads.renewalInfo(
                originalTransactionId: "3000000000000020", productId: "pro.monthly", environment: .sandbox, isInBillingRetryPeriod: true,
                gracePeriodExpiresDate: graceEnds, signedDate: Date()))
            let failed = try signed.notification("DID_FAIL_TO_RENEW", subtype: "GRACE_PERIOD", transaction: carols, renewalInfo: info)
            #expect(try await api.postNotification(failed).status == 200)

            // Everything, once the clock has passed alice's end and carol's grace period.
            let all = try await api.allChanges(until: { changes in changes.contains { $0.userId == "alice" && $0.type == "expired" } && changes.contains { $0.type == "grace_period_ended" } })
            let byUser = Dictionary(grouping: all, by: \.userId)
            #expect(byUser["alice"]?.map(\.type) == ["purchase", "renewal", "expired"], "\(all.map(\.summary))")
            #expect(byUser["alice"]?.first?.happened.contains("entitlement_gained") == true)
            #expect(byUser["alice"]?.last?.happened == ["expired", "entitlement_lost"], "\(all.map(\.summary))")
            #expect(byUser["alice"]?.last?.occurredAt == LedgerJSON.formatTimestamp(ta.addingTimeInterval(30)))
            #expect(byUser["bob"]?.map(\.type) == ["purchase", "consumed", "refund"], "\(all.map(\.summary))")
            #expect(byUser["bob"]?.map(\.balanceAfter) == [3, 2, -1], "\(all.map(\.summary))")
            #expect(byUser["carol"]?.map(\.type) == ["purchase", "grace_period_entered", "grace_period_ended"], "\(all.map(\.summary))")
            #expect(byUser["carol"]?.last?.occurredAt == LedgerJSON.formatTimestamp(graceEnds))
            #expect(byUser["carol"]?.last?.happened == ["grace_period_ended", "entitlement_lost"])
            // The entitlements after carol's grace period: nothing active.
            #expect(byUser["carol"]?.last?.activeProducts == [], "\(all.map(\.summary))")
            #expect(byUser["alice"]?[1].activeProducts == ["pro.monthly"])
            // Log order, ids unique, each expiry at a clock position of its own.
            let places = all.map { [$0.position, Int64($0.seq)] }
            #expect(places == places.sorted { ($0[0], $0[1]) < ($1[0], $1[1]) })
            #expect(Set(all.map(\.id)).count == all.count)
            let clock = try await api.client.query("SELECT count(*) FROM ledger.events WHERE stream_id = 'clock/' || \(Self.app)")
            for try await count in clock.decode(Int.self) { #expect(count >= 1) }

            // Resuming after a change id gives what follows it; after a position, what follows that.
            let afterBobsPurchase = try await api.changes(after: byUser["bob"]![0].id)
            #expect(afterBobsPurchase.changes.first?.id == all[all.firstIndex { $0.id == byUser["bob"]![0].id }! + 1].id)
            let tail = try await api.changes(after: String(all[2].position), limit: 2)
            #expect(tail.changes.first?.position ?? 0 > all[2].position)
        }
    }

    @Test func aLongPollIsAnsweredWhenAChangeComesAndTheStreamCarriesTheSameChanges() async throws {
        try await SignedPayloadRoutesTests.run(followChanges: true) { api, signed in
            try await api.defineProduct("gold.badge", type: "non_consumable")
            let empty = try await api.changes(after: "0")
            // Held until the purchase below arrives.
            async let held = api.changes(after: String(empty.position), wait: 60)
            try await Task.sleep(for: .milliseconds(500))
            let badge = try signed.transaction("3000000000000100", product: "gold.badge", type: .nonConsumable, at: Date())
            let posted = ContinuousClock.now
            #expect(try await api.postTransaction("dave", device: "phone", badge).status == 200)
            let answered = try await held
            print("long poll answered \(ContinuousClock.now - posted) after the purchase was posted")
            #expect(answered.changes.map(\.type) == ["purchase"], "\(answered.changes.map(\.summary))")
            #expect(answered.changes.first?.happened == ["purchase", "entitlement_gained"])

            // The same change through Server-Sent Events, its id the event id.
            let streamed = ContinuousClock.now
            let expected = "event: change\nid: \(answered.changes[0].id)\ndata: {"
            // Until it comes, or 60 s: the long poll above once took 16 s under the whole suite.
            let stream = try await api.eventStream(after: "0", awaited: expected, seconds: 60)
            print("stream read for \(ContinuousClock.now - streamed)")
            #expect(stream.contains(expected), "\(stream)")

            // Bad cursors are refused with what was wrong.
            let refused = try await api.send(.GET, "/v1/apps/\(Self.app)/changes?after=yesterday", key: api.keys["read"])
            #expect(refused.status == 400 && refused.errorMessage?.contains("chg_1234_0") == true, "\(refused.text)")
            let missing = try await api.send(.GET, "/v1/apps/\(Self.app)/changes", key: api.keys["read"])
            #expect(missing.status == 400 && missing.errorMessage?.contains("after is required") == true, "\(missing.text)")
            let ingestOnly = try await api.send(.GET, "/v1/apps/\(Self.app)/changes?after=0", key: api.keys["ingest"])
            #expect(ingestOnly.status == 403, "\(ingestOnly.text)")
        }
    }
}

/// One change of the feed, as a follower reads it.
struct FollowedChange: Sendable {
    let id: String
    let position: Int64
    let seq: Int
    let userId: String
    let type: String
    let occurredAt: String
    let happened: [String]
    let balanceAfter: Int?
    let activeProducts: [String]

    init(_ json: [String: Any]) {
        id = json["id"] as? String ?? ""
        position = (json["position"] as? NSNumber)?.int64Value ?? 0
        seq = json["seq"] as? Int ?? 0
        userId = json["userId"] as? String ?? ""
        type = json["type"] as? String ?? ""
        occurredAt = json["occurredAt"] as? String ?? ""
        let happenings = json["happened"] as? [[String: Any]] ?? []
        happened = happenings.compactMap { $0["type"] as? String }
        balanceAfter = happenings.first { $0["type"] as? String == "balance_changed" }?["after"] as? Int
        let standing = json["entitlements"] as? [String: Any] ?? [:]
        let subscriptions = standing["subscriptions"] as? [[String: Any]] ?? []
        let owned = standing["owned"] as? [[String: Any]] ?? []
        activeProducts = (owned.compactMap { $0["productId"] as? String }
            + subscriptions.filter { $0["active"] as? Bool == true }.compactMap { $0["productId"] as? String }).sorted()
    }

    var summary: String { "\(id) \(userId) \(happened.joined(separator: "+")) at \(occurredAt)" }
}

extension APIHarness {
    struct FeedPage: Sendable {
        let changes: [FollowedChange]
        let position: Int64
        let more: Bool
    }

    func changes(after cursor: String, limit: Int = 100, wait: Int? = nil) async throws -> FeedPage {
        var path = "/v1/apps/\(APIHarness.app)/changes?after=\(cursor)&limit=\(limit)"
        if let wait { path += "&wait=\(wait)" }
        let answer = try await send(.GET, path, key: keys["read"])
        guard answer.status == 200 else { throw HarnessError(message: "the feed answered \(answer.status): \(answer.text)") }
        let changes = (answer.json["changes"] as? [[String: Any]] ?? []).map(FollowedChange.init)
        return FeedPage(changes: changes, position: (answer.json["position"] as? NSNumber)?.int64Value ?? -1,
                        more: answer.json["more"] as? Bool ?? false)
    }

    /// The whole feed, read again until `done` says it holds what is awaited (at most 90 s).
    func allChanges(until done: ([FollowedChange]) -> Bool) async throws -> [FollowedChange] {
        let deadline = ContinuousClock.now + .seconds(90)
        while true {
            var all: [FollowedChange] = []
            var cursor = "0"
            while true {
                let page = try await changes(after: cursor, limit: 3)
                all += page.changes
                cursor = String(page.position)
                if !page.more { break }
            }
            if done(all) || ContinuousClock.now > deadline { return all }
            try await Task.sleep(for: .milliseconds(300))
        }
    }

    /// What the Server-Sent Events form sends after `cursor` in its first `seconds` (it never ends
    /// by itself), or up to `awaited` once that comes: a loaded machine may take many seconds to
    /// send what an idle one sends at once.
    func eventStream(after cursor: String, awaited: String? = nil, seconds: Int = 3) async throws -> String {
        let connection = try RawConnection(base: base)
        defer { connection.close() }
        try connection.send("GET /v1/apps/\(APIHarness.app)/changes?after=\(cursor) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            + "Authorization: Bearer \(keys["read"]!)\r\nAccept: text/event-stream\r\n\r\n")
        return await connection.receiveUntilClosed(timeout: .seconds(seconds), orUntil: awaited).text
    }
}
