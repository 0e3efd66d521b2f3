import Foundation
import LedgerApplication
import Synchronization

/// `IdempotencyRecords` in memory, with the PostgreSQL store's rules: a key is claimed with its
/// request's hash, answered once, and released only while unanswered.
public final class InMemoryIdempotencyRecords: IdempotencyRecords, Sendable {
    private struct Record {
        let requestHash: Data
        var answer: (status: Int, body: Data)?
    }

    private let records = Mutex<[String: Record]>([:])

    public init() {}

    public func claim(app: String, key: String, requestHash: Data) async throws -> IdempotencyClaim {
        records.withLock { records in
            guard let record = records["\(app)/\(key)"] else {
                records["\(app)/\(key)"] = Record(requestHash: requestHash)
                return .claimed
            }
            guard record.requestHash == requestHash else { return .mismatch }
            return record.answer.map { .replay(status: $0.status, body: $0.body) } ?? .claimed
        }
    }

    public func complete(app: String, key: String, status: Int, body: Data) async throws {
        records.withLock { $0["\(app)/\(key)"]?.answer = (status, body) }
    }

    public func release(app: String, key: String) async throws {
        records.withLock { records in
            if records["\(app)/\(key)"]?.answer == nil { records["\(app)/\(key)"] = nil }
        }
    }
}
