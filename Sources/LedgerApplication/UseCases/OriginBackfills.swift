import Foundation
import LedgerDomain
import Logging

/// Apple's histories of purchases the ledger never saw, fetched after the posts that renew or
/// restore them, out of the posts' way: a post records what it brought and answers at once; the
/// fetch waits here, in a bounded queue, for one worker (`run`), which records what Apple lists for
/// the user as `ledger appstore backfill` does.
///
/// - One job per purchase at a time, and a purchase fetched (or failed) lately is not fetched
///   again for `quiet`: posts of renewals of an unknown origin do not each spend the app's quota.
/// - When Apple says to slow down (429), nothing is asked of it for that app until the time it
///   named; the job is kept and tried then.
/// - A full queue drops the new job with a warning: the post stands, and a later post of the same
///   purchase, or `ledger appstore backfill`, fetches it.
public actor OriginBackfills {
    public struct Job: Sendable, Hashable {
        public let app: String
        public let user: String
        public let originalTransactionId: String
        public let environment: StoreEnvironment
        public let metadata: [String: String]
    }

    struct Key: Hashable {
        let app: String
        let originalTransactionId: String
        let environment: StoreEnvironment
    }

    let backfill: BackfillHistory
    let capacity: Int
    let quiet: Duration
    let logger: Logger
    private var pending: [Job] = []
    private var queued: Set<Key> = []
    private var lastTried: [Key: ContinuousClock.Instant] = [:]
    private var heldUntil: [String: Date] = [:]
    private var wake: CheckedContinuation<Void, Never>?
    /// Jobs finished, for tests and the log: recorded, nothing to record, or failed.
    public private(set) var finished = 0

    public init(backfill: BackfillHistory, capacity: Int = 1_000, quiet: Duration = .seconds(3_600), logger: Logger) {
        self.backfill = backfill
        self.capacity = capacity
        self.quiet = quiet
        self.logger = logger
    }

    /// Queues the origins a post's recording lacks; returns how many were queued.
    @discardableResult
    public func enqueue(origins recording: RecordAppStoreFacts.Recording, post: RecordAppStoreFacts.Post, environment: StoreEnvironment) -> Int {
        var count = 0
        for original in BackfillHistory.unknownOrigins(of: recording) {
            let job = Job(app: post.app, user: post.userId, originalTransactionId: original, environment: environment, metadata: post.metadata)
            if enqueue(job) { count += 1 }
        }
        return count
    }

    func enqueue(_ job: Job) -> Bool {
        let key = Key(app: job.app, originalTransactionId: job.originalTransactionId, environment: job.environment)
        guard !queued.contains(key) else { return false }
        if let tried = lastTried[key], ContinuousClock.now - tried < quiet { return false }
        guard pending.count < capacity else {
            logger.warning("origin backfill queue full: this purchase's history is not fetched now; a later post or `ledger appstore backfill` fetches it", metadata: [
                "ledger.app": "\(job.app)", "ledger.original_transaction": "\(job.originalTransactionId)", "ledger.queue_capacity": "\(capacity)",
            ])
            return false
        }
        pending.append(job)
        queued.insert(key)
        wake?.resume()
        wake = nil
        return true
    }

    /// Jobs waiting.
    public var count: Int { pending.count }

    /// Works through the queue, one job at a time, until cancelled.
    public func run() async {
        while !Task.isCancelled {
            guard let index = nextReady() else {
                await waitForWork()
                continue
            }
            let job = pending.remove(at: index)
            let key = Key(app: job.app, originalTransactionId: job.originalTransactionId, environment: job.environment)
            do {
                _ = try await backfill.origin(job)
                queued.remove(key)
                lastTried[key] = .now
                finished += 1
            } catch TransactionHistoryError.rateLimited(let until, let reason) {
                // Kept, and tried when Apple said.
                heldUntil[job.app] = until ?? Date().addingTimeInterval(60)
                pending.append(job)
                logger.notice("origin backfill held back: \(reason)", metadata: ["ledger.app": "\(job.app)"])
            } catch {
                queued.remove(key)
                lastTried[key] = .now
                finished += 1
                logger.warning("origin backfill failed; the post stands, and `ledger appstore backfill` can fetch it later", metadata: [
                    "ledger.app": "\(job.app)", "ledger.original_transaction": "\(job.originalTransactionId)", "ledger.error": "\(error)",
                ])
            }
            pruneTried()
        }
    }

    /// The first job whose app is not held back, if any.
    private func nextReady() -> Int? {
        let now = Date()
        return pending.firstIndex { job in heldUntil[job.app].map { $0 <= now } ?? true }
    }

    /// Until a job comes, or a held-back app's time (checked every second), or cancellation.
    private func waitForWork() async {
        if !pending.isEmpty {
            try? await Task.sleep(for: .seconds(1))
            return
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled || !pending.isEmpty { continuation.resume() } else { wake = continuation }
            }
        } onCancel: {
            Task { await self.cancelWait() }
        }
    }

    private func cancelWait() {
        wake?.resume()
        wake = nil
    }

    private func pruneTried() {
        guard lastTried.count > 10_000 else { return }
        let now = ContinuousClock.now
        lastTried = lastTried.filter { now - $0.value < quiet }
    }
}
