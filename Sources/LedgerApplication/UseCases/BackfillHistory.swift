import Foundation
import LedgerDomain
import Logging

/// Records a customer's whole App Store history for a user, as Apple's App Store Server API lists
/// it (Get Transaction History), like a post of those transactions with no device: what the
/// user's stream holds is a duplicate, another user's transactions stay theirs. Used by
/// `ledger appstore backfill`, and after a post that renews or restores a purchase the stream
/// never saw (`unknownOrigins`).
public struct BackfillHistory: Sendable {
    /// What a backfill fetched and recorded.
    public struct Result: Sendable {
        public let environment: StoreEnvironment
        /// Transactions Apple's history listed.
        public let fetched: Int
        public let recording: RecordAppStoreFacts.Recording
    }

    let handler: UserCommandHandler
    let archive: any DocumentArchive
    let inbox: any NotificationInbox
    let directory: any AppDirectory
    let source: any TransactionHistorySource
    let logger: Logger

    public init(
        handler: UserCommandHandler, archive: any DocumentArchive, inbox: any NotificationInbox, directory: any AppDirectory,
        source: any TransactionHistorySource, logger: Logger
    ) {
        self.handler = handler
        self.archive = archive
        self.inbox = inbox
        self.directory = directory
        self.source = source
        self.logger = logger
    }

    /// What Apple lists is recorded as any answer is (and looks for no origins of its own).
    private var recorder: RecordAppStoreFacts {
        RecordAppStoreFacts(handler: handler, archive: archive, inbox: inbox, logger: logger)
    }

    /// Asks Apple for the history of the customer who made `transactionId` and records it for
    /// `user`. With no environment, production first, then the sandbox when production does not
    /// know the transaction (as Apple advises). Refusals are `BackfillError`s that say what to do.
    public func callAsFunction(
        app: String, user: String, transactionId: String, environment: StoreEnvironment?, metadata: [String: String] = ["source": "backfill"]
    ) async throws -> Result {
        guard let key = try await key(of: app) else {
            throw BackfillError("\(app) has no App Store Server API key: add one with `ledger apps appstore-key \(app) --key-id … --issuer-id … --private-key FILE.p8`")
        }
        return try await backfill(app: app, user: user, transactionId: transactionId, environment: environment, key: key, metadata: metadata)
    }

    private func backfill(
        app: String, user: String, transactionId: String, environment: StoreEnvironment?, key: ServerAPIKey, metadata: [String: String]
    ) async throws -> Result {
        var transactions: [HistoryTransaction] = []
        var used = environment ?? .production
        do {
            transactions = try await source.history(of: transactionId, app: app, environment: used, key: key)
        } catch TransactionHistoryError.transactionNotFound where environment == nil {
            used = .sandbox
            do {
                transactions = try await source.history(of: transactionId, app: app, environment: used, key: key)
            } catch TransactionHistoryError.transactionNotFound {
                throw BackfillError("the App Store knows no transaction \(transactionId), in production nor in the sandbox (404); nothing was recorded")
            } catch {
                throw BackfillError("\(error) (asking the sandbox: production did not know the transaction); nothing was recorded")
            }
        } catch let error as TransactionHistoryError {
            // Apple's "slow down" stays itself: whoever queued the fetch waits the time it named.
            if case .rateLimited = error { throw error }
            throw BackfillError("\(error); nothing was recorded")
        } catch {
            throw BackfillError("\(error); nothing was recorded")
        }
        guard !transactions.isEmpty else {
            throw BackfillError("the App Store's history of \(transactionId) in \(used.rawValue) lists no transaction; nothing was recorded")
        }
        let recording = try await recordFetched(transactions, renewalInfo: [], askedAbout: transactionId, app: app, user: user, environment: used,
                                                metadata: metadata)
        return Result(environment: used, fetched: transactions.count, recording: recording)
    }

    /// Records what the App Store Server API answered about `askedAbout` (signed transactions,
    /// renewal info, verified) for `user`, as a post with no device: the answer is kept as a
    /// document, what the stream holds is a duplicate, another user's transactions stay theirs.
    func recordFetched(
        _ transactions: [HistoryTransaction], renewalInfo: [[String: String]], askedAbout: String, app: String, user: String,
        environment: StoreEnvironment, metadata: [String: String]
    ) async throws -> RecordAppStoreFacts.Recording {
        let signed = transactions.map(\.fields)
        let text = try LedgerJSON.encode(signed) + (renewalInfo.isEmpty ? "" : "\n" + LedgerJSON.encode(renewalInfo))
        let joined = text + "\n" + askedAbout
        let document = AppStoreDocument(
            app: app, receiptHash: ContentHash.sha256Hex(joined), receiptData: joined, answerHash: ContentHash.sha256Hex(text),
            environment: environment.rawValue, status: 0, answeredAt: transactions.map(\.signedDate).max() ?? Date(), answer: Data(text.utf8)
        )
        let answer = AppStoreAnswer(receiptHash: document.receiptHash, answerHash: document.answerHash, environment: environment, status: 0,
                                    answeredAt: document.answeredAt, transactions: signed, renewalInfo: renewalInfo)
        return try await recorder.record(answer, document: document, post: .init(app: app, userId: user, deviceId: "", metadata: metadata))
    }

    /// The app's App Store Server API key, nil when it has none; refusals in words.
    private func key(of app: String) async throws -> ServerAPIKey? {
        do {
            return try await directory.serverAPIKey(of: app)
        } catch let error as AccessError {
            throw BackfillError(error.message)
        } catch let error as SecretError {
            throw BackfillError(error.message)
        }
    }

    /// After a post: the original transactions of what it recorded that the stream never saw (a
    /// renewal or a restore of a purchase made before the ledger, or whose post was lost).
    static func unknownOrigins(of recording: RecordAppStoreFacts.Recording) -> [String] {
        var seen: Set<String> = []
        return recording.recorded.compactMap { item -> String? in
            guard let id = item.transactionId, let transaction = recording.state.transactions[id], transaction.position == item.position,
                  transaction.originalTransactionId != id, recording.state.transactions[transaction.originalTransactionId] == nil,
                  !transaction.isFamilyShared, seen.insert(transaction.originalTransactionId).inserted
            else { return nil }
            return transaction.originalTransactionId
        }
    }

    /// Apple's history of a purchase the user's stream never saw, recorded for the user, when the
    /// app has a Server API key; nil when it has none.
    func origin(_ job: OriginBackfills.Job) async throws -> Result? {
        guard let key = try await key(of: job.app) else { return nil }
        let result = try await backfill(app: job.app, user: job.user, transactionId: job.originalTransactionId, environment: job.environment,
                                        key: key, metadata: job.metadata.merging(["source": "backfill"]) { $1 })
        logger.info("restore or renewal of an unseen purchase: its history fetched from the App Store", metadata: [
            "ledger.app": "\(job.app)", "ledger.original_transaction": "\(job.originalTransactionId)", "ledger.fetched": "\(result.fetched)",
            "ledger.recorded": "\(result.recording.recorded.count)",
        ])
        return result
    }
}

/// A refused or failed backfill, in words for whoever asked.
public struct BackfillError: Error, Sendable, CustomStringConvertible {
    public let message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
