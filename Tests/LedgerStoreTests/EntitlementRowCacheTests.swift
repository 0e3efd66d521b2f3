import LedgerApplication
import LedgerProjections
@testable import LedgerStore
import Synchronization
import Testing

@Suite("Entitlement rows kept in memory are used only where they are true, and forgotten when their user's stream or the catalog moves")
struct EntitlementRowCacheTests {
    static let alice = "user/com.example.app/alice"
    static let bob = "user/com.example.app/bob"

    static func rows(_ balance: Int64) -> EntitlementRows {
        var rows = EntitlementRows()
        rows.balances = [EntitlementRows.Balance(productId: "coins.100", purchased: balance, consumed: 0, balance: balance, overdrawn: false)]
        rows.userExists = true
        return rows
    }

    static func board(at position: Int64, version: Int = 1, change: Int64 = 1) -> ProjectionBoard {
        let board = ProjectionBoard()
        board.load(EntitlementRowCache.projections.map {
            RegistryRow(name: $0, version: version, state: .live, position: position, errorPosition: nil, change: change)
        })
        return board
    }

    static func announce(_ board: ProjectionBoard, _ name: ProjectionName, version: Int = 1, state: String = "live", at position: Int64, change: Int64) throws {
        board.apply(try #require(RegistryRow(announced: "\(name.rawValue) \(version) \(state) \(position) - \(change)".split(separator: " "))))
    }

    /// Brings the cache up to the board, answering which streams moved from `moved`; returns the ranges asked for.
    @discardableResult
    static func follow(_ cache: EntitlementRowCache, _ board: ProjectionBoard, moved: [String] = []) async throws -> [ClosedRange<Int64>] {
        let asked = Mutex<[ClosedRange<Int64>]>([])
        try await cache.follow(board) { after, through in
            asked.withLock { $0.append((after + 1)...through) }
            return moved
        }
        return asked.withLock { $0 }
    }

    static func keep(_ cache: EntitlementRowCache, _ stream: String, _ rows: EntitlementRows, at position: Int64) throws {
        guard case .miss(let epoch) = cache.lookup(stream, at: position) else { Issue.record("expected a miss"); return }
        cache.keep(rows, for: stream, epoch: try #require(epoch))
    }

    static func kept(_ cache: EntitlementRowCache, _ stream: String, at position: Int64) -> Int64? {
        guard case .hit(let rows) = cache.lookup(stream, at: position) else { return nil }
        return rows.balances.first?.balance
    }

    @Test("nothing is kept until the cache follows a board, and rows are answered only at the position they are true at")
    func keptOnlyWhereTrue() async throws {
        let cache = EntitlementRowCache()
        guard case .miss(nil) = cache.lookup(Self.alice, at: 0) else { Issue.record("a cache that follows nothing answers nothing"); return }
        cache.keep(Self.rows(3), for: Self.alice, epoch: 0)
        #expect(cache.count == 0 && cache.validThrough == nil)

        let board = Self.board(at: 10)
        try await Self.follow(cache, board)
        #expect(cache.validThrough == 10)
        try Self.keep(cache, Self.alice, Self.rows(3), at: 10)
        try Self.keep(cache, Self.bob, Self.rows(5), at: 10)
        #expect(Self.kept(cache, Self.alice, at: 10) == 3 && Self.kept(cache, Self.bob, at: 9) == 5)
        // The projections moved on, the cache has not accounted for it yet: the database is asked.
        #expect(Self.kept(cache, Self.alice, at: 11) == nil)

        // alice's stream moved in (10, 12]: she is forgotten, bob is not.
        for name in EntitlementRowCache.projections { try Self.announce(board, name, at: 12, change: 2) }
        #expect(try await Self.follow(cache, board, moved: [Self.alice]) == [11...12])
        #expect(cache.validThrough == 12 && Self.kept(cache, Self.alice, at: 12) == nil && Self.kept(cache, Self.bob, at: 12) == 5)
        // Nothing moved: nothing asked.
        #expect(try await Self.follow(cache, board).isEmpty)
    }

    @Test("rows read while the cache forgot something are not kept: they may be older than what was forgotten")
    func rowsReadAcrossAnInvalidationAreDropped() async throws {
        let cache = EntitlementRowCache()
        let board = Self.board(at: 10)
        try await Self.follow(cache, board)
        guard case .miss(let epoch?) = cache.lookup(Self.alice, at: 10) else { Issue.record("expected a miss"); return }
        // While the read is in flight, alice's stream moves and the cache follows.
        for name in EntitlementRowCache.projections { try Self.announce(board, name, at: 11, change: 2) }
        try await Self.follow(cache, board, moved: [Self.alice])
        cache.keep(Self.rows(3), for: Self.alice, epoch: epoch)
        #expect(cache.count == 0)
    }

    @Test("a catalog event, a new live version, a failed projection or a wide gap forget everything")
    func everythingForgotten() async throws {
        let cache = EntitlementRowCache()
        let board = Self.board(at: 10)
        try await Self.follow(cache, board)
        func fill(at position: Int64) throws {
            try Self.keep(cache, Self.alice, Self.rows(3), at: position)
            try Self.keep(cache, Self.bob, Self.rows(5), at: position)
            #expect(cache.count == 2)
        }
        try fill(at: 10)
        for name in EntitlementRowCache.projections { try Self.announce(board, name, at: 11, change: 2) }
        try await Self.follow(cache, board, moved: ["catalog/com.example.app"])
        #expect(cache.count == 0 && cache.validThrough == 11)

        // A rebuilt version of one projection goes live: its rows are new, even at the same position.
        try fill(at: 11)
        try Self.announce(board, .ownership, version: 2, state: "live", at: 11, change: 3)
        try Self.announce(board, .ownership, version: 1, state: "retired", at: 11, change: 4)
        #expect(try await Self.follow(cache, board).isEmpty)
        #expect(cache.count == 0 && cache.validThrough == 11)

        // One projection stops on an error: reads are refused, and nothing is kept.
        try fill(at: 11)
        try Self.announce(board, .consumableBalances, state: "failed", at: 11, change: 5)
        try await Self.follow(cache, board)
        #expect(cache.count == 0 && cache.validThrough == nil)
        try Self.announce(board, .consumableBalances, state: "live", at: 11, change: 6)
        try await Self.follow(cache, board)
        #expect(cache.validThrough == 11)

        // A catch-up wider than the cache asks the log about: everything is forgotten, nothing asked.
        try fill(at: 11)
        let far = 11 + EntitlementRowCache.largestGap + 1
        for (index, name) in EntitlementRowCache.projections.enumerated() { try Self.announce(board, name, version: name == .ownership ? 2 : 1, at: far, change: 7 + Int64(index)) }
        #expect(try await Self.follow(cache, board, moved: [Self.alice]).isEmpty)
        #expect(cache.count == 0 && cache.validThrough == far)

        // The feed stops listening: nothing is used until it follows again.
        try fill(at: far)
        cache.disable()
        #expect(cache.count == 0 && cache.validThrough == nil && Self.kept(cache, Self.alice, at: far) == nil)
    }

    @Test("a full cache forgets an eighth of its users to keep another")
    func capacity() async throws {
        let cache = EntitlementRowCache(capacity: 16)
        try await Self.follow(cache, Self.board(at: 1))
        for index in 0..<16 { try Self.keep(cache, "user/com.example.app/u\(index)", Self.rows(Int64(index)), at: 1) }
        #expect(cache.count == 16)
        try Self.keep(cache, Self.alice, Self.rows(3), at: 1)
        #expect(cache.count == 15 && Self.kept(cache, Self.alice, at: 1) == 3)
    }
}
