/// Keeps what Apple sent, as it came. A post that appends facts keeps its document with them, in
/// the append (`EventStore.append(_:to:expecting:keeping:)`); this keeps one on its own, for a post
/// that appends nothing.
///
/// Content-addressed and append-only: keeping the same document again keeps it once, and nothing
/// kept is ever changed.
public protocol DocumentArchive: Sendable {
    /// Stores the receipt (or signed payload) and the answer unless they are kept already: both or neither.
    func keep(_ document: AppStoreDocument) async throws
}
