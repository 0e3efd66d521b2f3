import Foundation
import LedgerApplication
import LedgerDomain
import Logging
import PostgresNIO
import ServiceLifecycle

/// Writes `ledger.changes`: every change of a user's standing, per app, in log order, for the
/// change feed and the webhooks. Runs in the server that leads the projections.
///
/// It follows the log through the gap-safe follower, so that a change is written only once every
/// earlier position is settled, and writes each batch's changes, the users' next deadlines and its
/// position in one transaction (checked and moved forward only, as a projection's checkpoint): a
/// crash or a new leader resumes exactly where the last commit left off. Each user event is judged
/// against the user's state just before it (`StandingChange.after`); what ends by time alone is
/// found by the clock (`tick`), which appends `ClockPassed` to the app's `clock/` stream once a
/// user's deadline is due, so that an expiry has a log position like every other change.
public struct ChangeWriter: Sendable {
    /// Bumped when what the writer derives from the log changes (changes already written stay).
    public static let version = 1

    let client: DatabasePool
    let store: PostgresEventStore
    let reader: UserStreamReader
    let follower: LogFollower
    let clockInterval: Duration
    let logger: Logger

    public init(
        client: DatabasePool, listenConfiguration: PostgresConnection.Configuration?, batchSize: Int = 1_000,
        pollInterval: Duration = .seconds(1), clockInterval: Duration = .seconds(1), logger: Logger
    ) {
        self.client = client
        let store = PostgresEventStore(client: client, logger: logger)
        self.store = store
        self.reader = UserStreamReader(store: store, kept: KeptFolds(capacity: 20_000))
        self.follower = LogFollower(store: store, listenConfiguration: listenConfiguration, pollInterval: pollInterval, batchSize: batchSize,
                                    logger: logger)
        self.clockInterval = clockInterval
        self.logger = logger
    }

    /// Follows the log and keeps the clock until cancelled; a lost database is retried within
    /// seconds, from the stored position. What the leading server runs beside the projections.
    public func keepWriting() async {
        var delay = Duration.milliseconds(250)
        while !Task.isCancelled {
            do {
                let start = try await position()
                logger.info("writing the change feed", metadata: ["ledger.position": "\(start)"])
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await follow(after: start) }
                    group.addTask { try await keepTheClock() }
                    defer { group.cancelAll() }
                    try await group.next()
                }
                delay = .milliseconds(250)
            } catch where Task.isCancelled || error is CancellationError {
                return
            } catch {
                logger.warning("the change feed's writer stopped; starting again from its position", metadata: [
                    "ledger.error": "\(String(reflecting: error))", "ledger.retry_in": "\(delay)",
                ])
                try? await Task.sleep(for: delay)
                delay = min(delay * 2, .seconds(5))
            }
        }
    }

    /// The position written through, registering the writer on its first run.
    func position() async throws -> Int64 {
        try await client.query(
            "INSERT INTO ledger.change_writer (position, version) VALUES (0, \(Self.version)) ON CONFLICT (id) DO NOTHING", logger: logger
        )
        let rows = try await client.query("SELECT position FROM ledger.change_writer", logger: logger).collect()
        return try rows.first?.decode(Int64.self) ?? 0
    }

    /// Writes the changes of everything the log holds now, batch by batch, and returns how many
    /// events it read (benchmarks, and tests that want the feed written before they read it).
    public func catchUp(batchSize: Int = 1_000) async throws -> Int {
        var from = try await position()
        var events = 0
        while true {
            let batch = try await store.readAll(after: from, limit: batchSize)
            guard let last = batch.last?.position else { return events }
            try await write(batch, from: from)
            events += batch.count
            from = last
        }
    }

    private func follow(after start: Int64) async throws {
        var from = start
        try await follower.follow(after: start) { events in
            try await write(events, from: from)
            from = events.last?.position ?? from
        }
    }

    // MARK: Writing a batch

    /// One change row, and the users' deadlines as the batch leaves them.
    struct Batch {
        var rows: [(app: String, user: String, record: ChangeRecord)] = []
        var deadlines: [UserKey: Date?] = [:]
    }

    /// Writes the changes of `events` (the log after `from`, in order) and moves the position to
    /// the last one, in one transaction.
    func write(_ events: [RecordedEvent], from: Int64) async throws {
        guard let last = events.last?.position else { return }
        let batch = try await changes(of: events, upTo: last)
        try await commit(batch, from: from, to: last)
    }

    /// The changes `events` make, in log order, with the deadlines they leave.
    func changes(of events: [RecordedEvent], upTo last: Int64) async throws -> Batch {
        var batch = Batch()
        var states: [UserKey: UserLedger] = [:]
        var catalogs: [String: ProductCatalog] = [:]
        func catalog(_ app: String) async throws -> ProductCatalog {
            if let known = catalogs[app] { return known }
            let catalog = try await reader.catalog(app: app, upToPosition: last)
            catalogs[app] = catalog
            return catalog
        }
        let users = Set(events.compactMap { UserKey(streamID: $0.streamID) })
        let stored = try await deadlines(of: Array(users))
        var tails = try await tailsBefore(events)
        for event in events {
            switch StreamID.kind(of: event.streamID) {
            case .user(let app, let user):
                let key = UserKey(app: app, user: user)
                let catalog = try await catalog(app)
                let stream = try StreamID.user(app: app, user: user)
                let before: UserLedger
                if let known = states[key] {
                    before = known
                } else {
                    // The kept fold, moved on by what the batch's one read found of the stream before the event.
                    before = try await reader.state(of: stream, upToPosition: event.position - 1, catalog: catalog, tail: tails.removeValue(forKey: key))
                }
                var seq = 0
                // What ran out before this fact came, told first.
                var due = batch.deadlines[key] ?? stored[key]
                while let deadline = due, deadline.milliseconds <= event.recordedAt.milliseconds {
                    if let change = StandingChange.byTime(before, catalog: catalog, at: deadline) {
                        batch.rows.append((app, user, ChangeRecord(app: app, userId: user, position: event.position, seq: seq,
                                                                   recordedAt: event.recordedAt, change: change)))
                        seq += 1
                    }
                    due = StandingChange.nextDeadline(before, catalog: catalog, after: deadline)
                }
                let fact: UserEvent
                do {
                    fact = try UserEvent(type: event.type, data: event.data)
                } catch {
                    throw ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
                }
                // `before` is the stream up to the version before this event: the fact read once
                // moves it on, as a fold of the stream would, and the fold kept is moved on with it.
                var after = before
                after.gather(fact, version: event.streamVersion, context: .init(position: event.position, recordedAt: event.recordedAt))
                after.classify(by: catalog)
                reader.giveBack(after, of: stream)
                if let change = StandingChange.after(fact, before: before, after: after, catalog: catalog, at: event.recordedAt) {
                    batch.rows.append((app, user, ChangeRecord(app: app, userId: user, position: event.position, seq: seq,
                                                               recordedAt: event.recordedAt, change: change)))
                }
                states[key] = after
                batch.deadlines[key] = .some(StandingChange.nextDeadline(after, catalog: catalog, after: event.recordedAt))
            case .clock(let app):
                let passed: ClockPassed
                do {
                    passed = try LedgerJSON.decode(ClockPassed.self, from: event.data)
                } catch {
                    throw ProjectionFailure(message: "cannot read event at position \(event.position) (\(event.type)): \(error)", position: event.position)
                }
                let catalog = try await catalog(app)
                var seq = 0
                for (key, first) in try await due(app: app, by: passed.through, batch: batch) {
                    let stream = try StreamID.user(app: app, user: key.user)
                    let state: UserLedger
                    if let known = states[key] {
                        state = known
                    } else {
                        state = try await reader.state(of: stream, upToPosition: event.position, catalog: catalog)
                        states[key] = state
                    }
                    var due: Date? = first
                    while let deadline = due, deadline.milliseconds <= passed.through.milliseconds {
                        if let change = StandingChange.byTime(state, catalog: catalog, at: deadline) {
                            batch.rows.append((app, key.user, ChangeRecord(app: app, userId: key.user, position: event.position, seq: seq,
                                                                           recordedAt: event.recordedAt, change: change)))
                            seq += 1
                        }
                        due = StandingChange.nextDeadline(state, catalog: catalog, after: deadline)
                    }
                    batch.deadlines[key] = .some(due)
                }
            default:
                continue
            }
        }
        return batch
    }

    /// For each user of the batch, what the writer's kept fold lacks of the stream before the
    /// user's first event in the batch, read in one statement for all of them: a user whose kept
    /// fold ends right there needs nothing read (an empty tail), and one whose fold was forgotten
    /// (or never made) is read from where it was kept, not one query per user.
    private func tailsBefore(_ events: [RecordedEvent]) async throws -> [UserKey: UserStreamReader.Tail] {
        var first: [UserKey: RecordedEvent] = [:]
        for event in events {
            guard let key = UserKey(streamID: event.streamID), first[key] == nil else { continue }
            first[key] = event
        }
        var tails: [UserKey: UserStreamReader.Tail] = [:]
        var wanted: [(key: UserKey, stream: StreamID, afterVersion: Int64, before: Int64)] = []
        for (key, event) in first {
            let stream = try StreamID.user(app: key.app, user: key.user)
            let kept = reader.kept?.kept(user: stream.rawValue)
            let version = kept?.version ?? 0
            if let kept, kept.lastPosition >= event.position { continue }
            if version == event.streamVersion - 1 {
                tails[key] = .init(afterVersion: version, events: [])
            } else {
                wanted.append((key, stream, version, event.position))
            }
        }
        guard !wanted.isEmpty, let last = events.last?.position else { return tails }
        let read = try await store.readStreams(wanted.map { ($0.stream, $0.afterVersion) }, upToPosition: last)
        for item in wanted {
            tails[item.key] = .init(afterVersion: item.afterVersion, events: (read[item.stream.rawValue] ?? []).filter { $0.position < item.before })
        }
        return tails
    }

    /// The users of `app` whose deadline is due by `through`, as the batch so far leaves them
    /// (its own deadlines first, the stored ones for everyone else), in user order.
    private func due(app: String, by through: Date, batch: Batch) async throws -> [(UserKey, Date)] {
        var due: [UserKey: Date] = [:]
        let rows = try await client.query(
            "SELECT user_id, due_at FROM ledger.change_deadlines WHERE app = \(app) AND due_at <= \(through)", logger: logger
        )
        for try await (user, at) in rows.decode((String, Date).self) {
            due[UserKey(app: app, user: user)] = at
        }
        for (key, deadline) in batch.deadlines where key.app == app {
            if let deadline, deadline.milliseconds <= through.milliseconds { due[key] = deadline } else { due[key] = nil }
        }
        return due.sorted { $0.key.user < $1.key.user }
    }

    /// The stored deadlines of `users`.
    private func deadlines(of users: [UserKey]) async throws -> [UserKey: Date] {
        guard !users.isEmpty else { return [:] }
        let rows = try await client.query(
            """
            SELECT d.app, d.user_id, d.due_at FROM ledger.change_deadlines d
            JOIN unnest(\(users.map(\.app)), \(users.map(\.user))) AS u(app, user_id) ON d.app = u.app AND d.user_id = u.user_id
            """,
            logger: logger
        )
        var found: [UserKey: Date] = [:]
        for try await (app, user, at) in rows.decode((String, String, Date).self) {
            found[UserKey(app: app, user: user)] = at
        }
        return found
    }

    /// The writer's position moved from where this batch started; another writer got there first.
    struct PositionMoved: Error, CustomStringConvertible {
        let expected: Int64
        let found: Int64
        var description: String { "the change feed's position is \(found), not \(expected): another server wrote it" }
    }

    private func commit(_ batch: Batch, from: Int64, to last: Int64) async throws {
        let bodies = try batch.rows.map { try $0.record.json() }
        let set = batch.deadlines.compactMap { key, due in due.map { (key, $0) } }
        let cleared = batch.deadlines.compactMap { key, due in due == nil ? key : nil }
        try await client.withConnection { connection in
            try await connection.transaction(logger: logger) { connection in
                let rows = try await connection.query("SELECT position FROM ledger.change_writer FOR UPDATE", logger: logger).collect()
                let found = try rows.first?.decode(Int64.self) ?? -1
                guard found == from else { throw PositionMoved(expected: from, found: found) }
                if !batch.rows.isEmpty {
                    try await connection.query(
                        """
                        INSERT INTO ledger.changes (app, position, seq, user_id, type, occurred_at, recorded_at, body)
                        SELECT * FROM unnest(\(batch.rows.map(\.app)), \(batch.rows.map(\.record.position)), \(batch.rows.map { Int32($0.record.seq) }),
                                             \(batch.rows.map(\.user)), \(batch.rows.map(\.record.type.rawValue)),
                                             \(batch.rows.map(\.record.occurredAt)), \(batch.rows.map(\.record.recordedAt)), \(bodies))
                        """,
                        logger: logger
                    )
                }
                if !set.isEmpty {
                    try await connection.query(
                        """
                        INSERT INTO ledger.change_deadlines (app, user_id, due_at)
                        SELECT * FROM unnest(\(set.map(\.0.app)), \(set.map(\.0.user)), \(set.map(\.1)))
                        ON CONFLICT (app, user_id) DO UPDATE SET due_at = excluded.due_at
                        """,
                        logger: logger
                    )
                }
                if !cleared.isEmpty {
                    try await connection.query(
                        """
                        DELETE FROM ledger.change_deadlines d USING unnest(\(cleared.map(\.app)), \(cleared.map(\.user))) AS u(app, user_id)
                        WHERE d.app = u.app AND d.user_id = u.user_id
                        """,
                        logger: logger
                    )
                }
                try await connection.query(
                    "UPDATE ledger.change_writer SET position = \(last), version = \(Self.version), updated_at = now()", logger: logger
                )
                // Wakes the feed's long polls in every server (see `ChangeFeed`).
                try await connection.query("SELECT pg_notify(\(ChangeFeed.channel), \("feed \(last)"))", logger: logger)
            }
        }
    }

    // MARK: The clock

    /// Once a second, appends `ClockPassed` to the `clock/` stream of each app with a user's
    /// deadline due, unless the writer has not yet reached the last one it appended there.
    private func keepTheClock() async throws {
        var appended: [String: Int64] = [:]
        while !Task.isCancelled {
            try await tick(appended: &appended)
            try await Task.sleep(for: clockInterval)
        }
    }

    /// One turn of the clock; returns the apps it appended `ClockPassed` for.
    @discardableResult
    func tick(appended: inout [String: Int64]) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT d.app, now(), (SELECT position FROM ledger.change_writer)
            FROM ledger.change_deadlines d WHERE d.due_at <= now() GROUP BY d.app ORDER BY d.app
            """,
            logger: logger
        )
        var ticked: [String] = []
        for try await (app, now, written) in rows.decode((String, Date, Int64?).self) {
            if let pending = appended[app], pending > (written ?? 0) { continue }
            let result = try await store.append([NewEvent(ClockPassed(through: now))], to: StreamID.clock(app: app), expecting: .any)
            appended[app] = result.position
            ticked.append(app)
        }
        return ticked
    }
}

extension ChangeWriter: Service {
    /// `keepWriting` as a service of its own (tests, a server that alone writes its database).
    public func run() async throws {
        try await cancelWhenGracefulShutdown { await keepWriting() }
    }
}
