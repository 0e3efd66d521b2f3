import Foundation
import LedgerStore
import LedgerTesting
import NIOHTTP1
import Synchronization
import Testing

/// The entitlement rows a server keeps in memory (`EntitlementRowCache`), through HTTP: reads of a
/// user whose rows have not changed are answered from memory, and no answer is older than the
/// position it gives.
@Suite struct EntitlementCacheTests {
    static func entitlements(_ user: String, minPosition: Int? = nil) -> String {
        "/v1/apps/\(APIHarness.app)/users/\(user)/entitlements" + (minPosition.map { "?minPosition=\($0)" } ?? "")
    }

    static func balance(_ answer: APIHarness.Answer, _ product: String) -> Int? {
        (answer.json["consumables"] as? [[String: Any]])?.first { $0["productId"] as? String == product }?["balance"] as? Int
    }

    @Test("a user's write, or a catalog edit, forgets what was kept; other users' rows are answered from memory")
    func writesAndCatalogEditsForgetKeptRows() async throws {
        try await APIHarness.run { api in
            let cache = try #require(api.changes?.entitlements)
            try await api.defineProduct("coins.100", type: "consumable")
            var positions: [Int] = []
            for user in ["alice", "bob"] {
                let bought = try await api.buy(user, "coins.100", quantity: 3)
                let ingested = try await api.ingest(user, device: "phone", receipt: bought.receipt)
                #expect(ingested.status == 200, "\(ingested.text)")
                positions.append(try #require(ingested.json["position"] as? Int))
            }
            let head = try #require(positions.max())
            // Once the cache has accounted for the log up to the head, the first reads keep the rows, the next are answered from memory.
            // On a loaded machine the change feed may get no answer for a second and stop listening: the cache
            // then forgets everything until it listens again (CI saw it once), so the reads are tried again until kept.
            #expect(try await eventually(timeout: .seconds(30)) {
                guard (cache.validThrough ?? 0) >= Int64(head) else { return false }
                for user in ["alice", "bob"] {
                    let first = try await api.send(.GET, Self.entitlements(user), key: api.allKey)
                    guard first.status == 200, Self.balance(first, "coins.100") == 3 else { return false }
                }
                return cache.count == 2
            })
            #expect(try await eventually(timeout: .seconds(30)) {
                let hits = cache.hitCount
                let again = try await api.send(.GET, Self.entitlements("bob"), key: api.allKey)
                return Self.balance(again, "coins.100") == 3 && cache.hitCount == hits + 1
            })

            // alice uses one: her next read with the write's position shows it, kept or not.
            let used = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/alice/consumptions", key: api.allKey,
                                          json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(used.status == 201, "\(used.text)")
            let position = try #require(used.json["position"] as? Int)
            let after = try await api.send(.GET, Self.entitlements("alice", minPosition: position), key: api.allKey)
            #expect(Self.balance(after, "coins.100") == 2, "\(after.text)")
            #expect(try await eventually(timeout: .seconds(30)) { (cache.validThrough ?? 0) >= Int64(position) })
            // Only alice was forgotten (then kept again by the read above, or the next one); bob is still answered from memory.
            #expect(try await eventually(timeout: .seconds(30)) {
                let bobHits = cache.hitCount
                let bob = try await api.send(.GET, Self.entitlements("bob"), key: api.allKey)
                return Self.balance(bob, "coins.100") == 3 && cache.hitCount == bobHits + 1
            })
            let alice = try await api.send(.GET, Self.entitlements("alice"), key: api.allKey)
            #expect(Self.balance(alice, "coins.100") == 2 && (alice.json["position"] as? Int ?? 0) >= position, "\(alice.text)")

            // The balances and subscriptions routes answer from the same kept rows.
            #expect(try await eventually(timeout: .seconds(30)) {
                let routeHits = cache.hitCount
                let balances = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/bob/balances", key: api.allKey)
                let bobBalance = (balances.json["balances"] as? [[String: Any]])?.first?["balance"] as? Int
                let subscriptions = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/bob/subscriptions", key: api.allKey)
                return balances.status == 200 && bobBalance == 3 && subscriptions.status == 200
                    && (subscriptions.json["periods"] as? [Any])?.isEmpty == true && cache.hitCount == routeHits + 2
            })
            let unknown = try await api.send(.GET, "/v1/apps/\(APIHarness.app)/users/nobody/balances", key: api.allKey)
            #expect(unknown.status == 404, "\(unknown.text)")

            // A catalog edit may change every user's rows: all are forgotten.
            #expect(cache.count >= 1)
            try await api.defineProduct("coins.500", type: "consumable")
            #expect(try await eventually(timeout: .seconds(30)) { cache.count == 0 })

            // An unknown user is never kept: anyone may ask for any name.
            let nobody = try await api.send(.GET, Self.entitlements("nobody"), key: api.allKey)
            #expect(nobody.status == 404 && cache.count == 0, "\(nobody.text)")
        }
    }

    @Test("while a user's balance moves, no read answers a balance older than the position it gives")
    func noAnswerIsOlderThanItsPosition() async throws {
        try await APIHarness.run { api in
            let cache = try #require(api.changes?.entitlements)
            try await api.defineProduct("coins.100", type: "consumable")
            var last: APIHarness.Answer?
            for _ in 0..<4 {
                let bought = try await api.buy("alice", "coins.100", quantity: 10)
                last = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
                #expect(last?.status == 200, "\(last?.text ?? "")")
            }
            let ingested = try #require(last)
            let hitsBefore = cache.hitCount

            // One writer uses the coins one at a time, pausing now and then so that reads come from
            // memory in between; four readers read alice without asking for a position.
            let seen = Seen(bought: try #require(ingested.json["position"] as? Int), balance: 40)
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask {
                    defer { seen.writing.store(false, ordering: .relaxed) }
                    for left in (0..<40).reversed() {
                        let used = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/alice/consumptions", key: api.allKey,
                                                      json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
                        #expect(used.status == 201, "\(used.text)")
                        let position = try #require(used.json["position"] as? Int)
                        seen.writes.withLock { $0.append((position, left)) }
                        try await Task.sleep(for: .milliseconds(Int.random(in: 0...30)))
                    }
                }
                for _ in 0..<4 {
                    group.addTask {
                        while seen.writing.load(ordering: .relaxed) {
                            let answer = try await api.send(.GET, Self.entitlements("alice"), key: api.allKey)
                            #expect(answer.status == 200, "\(answer.text)")
                            guard let position = answer.json["position"] as? Int, let balance = Self.balance(answer, "coins.100") else { continue }
                            seen.reads.withLock { $0.append((position, balance)) }
                        }
                    }
                }
                try await group.waitForAll()
            }

            // The balance after the last use at or before each answer's position: an answer may be
            // newer than its position (rows read after the checkpoint moved), never older.
            let written = seen.writes.withLock { $0 }.sorted { $0.position < $1.position }
            let answers = seen.reads.withLock { $0 }
            for read in answers {
                let due = written.last { $0.position <= read.position }?.balance ?? 40
                #expect(read.balance <= due, "an answer at position \(read.position) says \(read.balance) left; \(due) were left there")
            }
            let fromMemory = cache.hitCount - hitsBefore
            print("entitlement cache under writes: \(answers.count) reads, \(fromMemory) from memory")
            #expect(answers.count > 40 && fromMemory > 0, "\(answers.count) reads, \(fromMemory) from memory")
        }
    }

    /// What the writer and the readers of `noAnswerIsOlderThanItsPosition` saw: positions and balances.
    final class Seen: Sendable {
        let writes: Mutex<[(position: Int, balance: Int)]>
        let reads = Mutex<[(position: Int, balance: Int)]>([])
        let writing = Atomic<Bool>(true)

        init(bought position: Int, balance: Int) {
            writes = Mutex([(position, balance)])
        }
    }
}
