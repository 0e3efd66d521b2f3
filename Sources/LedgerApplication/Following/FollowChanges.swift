/// An app's server following the ledger: its changes after the position it last handled, a page
/// at a time, waiting (long poll) when there are none yet.
public struct FollowChanges: Sendable {
    public static let maximumLimit = 1_000
    public static let maximumWait: Duration = .seconds(60)

    let reads: any ChangeReads

    public init(reads: any ChangeReads) {
        self.reads = reads
    }

    /// The changes after `cursor`; with `wait`, held until at least one comes or `wait` passes
    /// (then the page is empty, and its position still moves past positions without the app's
    /// changes). A wake-up missed (a server not listening) costs at most a second.
    public func page(app: String, after cursor: ChangeCursor, limit: Int, wait: Duration = .zero) async throws -> ChangePage {
        let deadline = ContinuousClock.now + min(wait, Self.maximumWait)
        while true {
            let page = try await reads.changes(app: app, after: cursor, limit: min(max(limit, 1), Self.maximumLimit))
            let left = deadline - .now
            guard page.changes.isEmpty, left > .zero, !Task.isCancelled else { return page }
            await reads.waitForChanges(after: page.position, atMost: min(left, .seconds(1)))
        }
    }
}
