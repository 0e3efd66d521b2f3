/// The change feed as stored: what `FollowChanges` reads.
public protocol ChangeReads: Sendable {
    /// The app's changes after `cursor`, at most about `limit` (a page never splits the changes
    /// of one log position, so it may hold a few more).
    func changes(app: String, after cursor: ChangeCursor, limit: Int) async throws -> ChangePage

    /// Returns once the feed may have been written past `position` (at once when it was said to
    /// be already), or after `timeout`, whichever is first.
    func waitForChanges(after position: Int64, atMost timeout: Duration) async
}
