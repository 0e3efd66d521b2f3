import LedgerApplication
import Synchronization

/// `DocumentArchive` in memory: each document kept once by its hashes, as the PostgreSQL archive
/// keeps them (content-addressed, never changed).
public final class InMemoryDocumentArchive: DocumentArchive, Sendable {
    private let kept = Mutex<[String: AppStoreDocument]>([:])

    public init() {}

    public func keep(_ document: AppStoreDocument) async throws {
        kept.withLock { kept in
            if kept[document.answerHash] == nil { kept[document.answerHash] = document }
        }
    }

    /// Every document kept, by the hash of its answer.
    public var documents: [String: AppStoreDocument] { kept.withLock { $0 } }
}
