/// Keeps what Apple sent, as it came, before any fact that names it is appended.
///
/// Content-addressed and append-only: keeping the same document again keeps it once, and nothing
/// kept is ever changed. A crash between keeping a document and appending its facts leaves a
/// document no fact names yet, which the same post later reuses.
public protocol DocumentArchive: Sendable {
    /// Stores the receipt (or signed payload) and the answer unless they are kept already: both or neither.
    func keep(_ document: AppStoreDocument) async throws
}
