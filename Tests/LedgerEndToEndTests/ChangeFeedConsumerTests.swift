import AppStoreSimulator
import Foundation
import LedgerDomain
import LedgerDomainTesting
import LedgerTesting
import NIOHTTP1
import Testing

/// A follower that crashes at random moments and resumes from what it stored, over a random
/// history of purchases, consumptions, renewals with no device (notifications), refunds and
/// expiries: it handles every change exactly once, in log order, and what it was told of each
/// user is what the history's own plan says happened.
@Suite struct ChangeFeedConsumerTests {
    static let app = APIHarness.app

    /// What the history does to one user, and the changes it must give, in order.
    struct Plan {
        var user: String
        var expected: [String] = []
        /// Auto-renewables: the instant the last period ends (an `expired` change then).
        var endsAt: Date?
    }

    @Test(arguments: [UInt64(7), 2_026])
    func aFollowerThatCrashesAtRandomHandlesEveryChangeOnceInOrder(seed: UInt64) async throws {
        try await SignedPayloadRoutesTests.run("crashingFollower\(seed)", followChanges: true) { api, signed in
            var random = SeededGenerator(seed: seed)
            try await api.defineProduct("coins.100", type: "consumable")
            try await api.defineProduct("gold.badge", type: "non_consumable")
            try await api.defineProduct("pro.monthly", type: "auto_renewable", duration: "P1M")
            let t0 = Date()
            var plans: [Plan] = []
            var transaction = 4_000_000_000_000_000 + Int(seed % 1_000) * 1_000
            func nextId() -> String {
                transaction += 1
                return String(transaction)
            }
            for index in 0..<14 {
                var plan = Plan(user: "user-\(seed)-\(index)")
                switch Int.random(in: 0..<3, using: &random) {
                case 0:
                    let id = nextId()
                    let bought = t0.addingTimeInterval(-120)
                    let quantity = Int.random(in: 2...5, using: &random)
                    let jws = try signed.transaction(id, product: "coins.100", type: .consumable, at: bought, quantity: quantity)
                    #expect(try await api.postTransaction(plan.user, device: "phone", jws).status == 200)
                    plan.expected.append("purchase")
                    if Bool.random(using: &random) {
                        let used = try await api.send(.POST, "/v1/apps/\(Self.app)/users/\(plan.user)/consumptions", key: api.allKey,
                                                      json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
                        #expect(used.status == 201, "\(used.text)")
                        plan.expected.append("consumed")
                    }
                    if Bool.random(using: &random) {
                        let refunded = try signed.transaction(id, product: "coins.100", type: .consumable, at: bought, quantity: quantity, revoked: Date())
                        #expect(try await api.postNotification(try signed.notification("REFUND", transaction: refunded)).status == 200)
                        plan.expected.append("refund")
                    }
                case 1:
                    let id = nextId()
                    let bought = t0.addingTimeInterval(-60)
                    #expect(try await api.postTransaction(plan.user, device: "pad", try signed.transaction(id, product: "gold.badge", type: .nonConsumable, at: bought)).status == 200)
                    plan.expected.append("purchase")
                    if Bool.random(using: &random) {
                        let refunded = try signed.transaction(id, product: "gold.badge", type: .nonConsumable, at: bought, revoked: Date())
                        #expect(try await api.postNotification(try signed.notification("REFUND", transaction: refunded)).status == 200)
                        plan.expected.append("refund")
                    }
                default:
                    let original = nextId()
                    // Ends well ahead of the post (on a loaded machine a post may take seconds): the
                    // period must still run when its facts are recorded.
                    var ends = Date().addingTimeInterval(Double(Int.random(in: 15...25, using: &random)))
                    let first = try signed.transaction(original, product: "pro.monthly", type: .autoRenewable, at: t0.addingTimeInterval(-30), expires: ends)
                    #expect(try await api.postTransaction(plan.user, device: "phone", first).status == 200)
                    plan.expected.append("purchase")
                    if Bool.random(using: &random) {
                        let start = ends
                        ends = start.addingTimeInterval(Double(Int.random(in: 3...8, using: &random)))
                        let renewal = try signed.transaction(nextId(), original: original, product: "pro.monthly", type: .autoRenewable, at: start, expires: ends)
                        #expect(try await api.postNotification(try signed.notification("DID_RENEW", transaction: renewal)).status == 200)
                        plan.expected.append("renewal")
                    }
                    plan.expected.append("expired")
                    plan.endsAt = ends
                }
                plans.append(plan)
            }
            let expectedCount = plans.reduce(0) { $0 + $1.expected.count }

            // The follower: handles a change and stores its id together (as in one transaction of
            // its own database); a crash loses the page it held, never what it stored.
            var stored = "0"
            var handled: [FollowedChange] = []
            var crashes = 0
            let deadline = ContinuousClock.now + .seconds(150)
            while handled.count < expectedCount, ContinuousClock.now < deadline {
                let page = try await api.changes(after: stored, limit: Int.random(in: 1...7, using: &random), wait: 2)
                var crashed = false
                for change in page.changes {
                    if Int.random(in: 0..<6, using: &random) == 0 {
                        crashed = true
                        break
                    }
                    handled.append(change)
                    stored = change.id
                }
                if crashed {
                    crashes += 1
                    continue
                }
                // A page read whole: its position is where to go on from (past positions of no change).
                if !page.more, Bool.random(using: &random) { stored = String(page.position) }
            }

            #expect(handled.count == expectedCount, "handled \(handled.count) of \(expectedCount) changes: \(handled.map(\.summary))")
            #expect(Set(handled.map(\.id)).count == handled.count, "a change handled twice")
            let places = handled.map { [$0.position, Int64($0.seq)] }
            #expect(places == places.sorted { ($0[0], $0[1]) < ($1[0], $1[1]) }, "not in log order")
            for plan in plans {
                let told = handled.filter { $0.userId == plan.user }
                #expect(told.map(\.type) == plan.expected, "\(plan.user): \(told.map(\.summary))")
                if let ends = plan.endsAt {
                    #expect(told.last?.occurredAt == LedgerJSON.formatTimestamp(ends), "\(plan.user): \(told.map(\.summary))")
                }
            }
            // What it handled is the feed read straight through.
            let straight = try await api.allChanges { $0.count >= expectedCount }
            #expect(straight.map(\.id) == handled.map(\.id))
            print("crashing follower (seed \(seed)): \(handled.count) changes handled once each across \(crashes) crashes")
        }
    }
}
