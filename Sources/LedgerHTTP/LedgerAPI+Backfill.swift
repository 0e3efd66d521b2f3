import AppStore
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerStore
import Logging

/// A refused or failed backfill, in words for whoever asked.
public struct BackfillError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

extension LedgerAPI {
    /// What a backfill fetched and recorded.
    public struct Backfill: Sendable {
        public struct Item: Sendable {
            public let kind: String
            public let transactionId: String?
            public let productId: String?
            public let position: Int64
        }

        public let environment: StoreEnvironment
        /// Transactions Apple's history listed.
        public let fetched: Int
        public let recorded: [Item]
        /// Transactions of the history the user's stream already held as Apple says them.
        public let duplicates: [String]
        /// Transactions of the history another user of the app holds (left to them).
        public let notRecorded: [String]
        public let position: Int64
    }

    /// Asks the App Store Server API for the transaction history of the customer who made
    /// `transactionId` and records it for `user`, as facts, like a post of those transactions
    /// (no device: `deviceId` is empty). With no environment, production first, then the sandbox
    /// when production does not know the transaction (as Apple advises).
    public func backfill(app: String, user: String, transactionId: String, environment: StoreEnvironment?, logger: Logger) async throws -> Backfill {
        let (recording, fetched, used) = try await backfillRecording(
            app: app, user: user, transactionId: transactionId, environment: environment, metadata: ["source": "backfill"], logger: logger
        )
        return Backfill(
            environment: used, fetched: fetched,
            recorded: recording.recorded.map { Backfill.Item(kind: $0.kind, transactionId: $0.transactionId, productId: $0.productId, position: $0.position) },
            duplicates: recording.duplicates.map(\.transactionId), notRecorded: recording.notRecorded.map(\.transactionId), position: recording.position
        )
    }

    func backfillRecording(
        app: String, user: String, transactionId: String, environment: StoreEnvironment?, key given: AppStoreServerAPIKey? = nil,
        metadata: [String: String], logger: Logger
    ) async throws -> (Recording, fetched: Int, environment: StoreEnvironment) {
        try Self.validateIdentifier(user, field: "userId")
        var key = given
        if key == nil { key = try await serverAPIKey(of: app) }
        guard let key else {
            throw BackfillError(message: "\(app) has no App Store Server API key: add one with `ledger apps appstore-key \(app) --key-id … --issuer-id … --private-key FILE.p8`")
        }
        var transactions: [SignedTransaction] = []
        var used = environment ?? .production
        do {
            transactions = try await serverAPI.history(of: transactionId, bundleId: app, environment: used, key: key)
        } catch .transactionNotFound where environment == nil {
            used = .sandbox
            do {
                transactions = try await serverAPI.history(of: transactionId, bundleId: app, environment: used, key: key)
            } catch .transactionNotFound {
                throw BackfillError(message: "the App Store knows no transaction \(transactionId), in production nor in the sandbox (404); nothing was recorded")
            } catch {
                throw BackfillError(message: "\(error.description) (asking the sandbox: production did not know the transaction); nothing was recorded")
            }
        } catch {
            throw BackfillError(message: "\(error.description); nothing was recorded")
        }
        guard !transactions.isEmpty else {
            throw BackfillError(message: "the App Store's history of \(transactionId) in \(used.rawValue) lists no transaction; nothing was recorded")
        }
        let signed = transactions.map(\.fields)
        let text = try LedgerJSON.encode(signed)
        let joined = text + "\n" + transactionId
        let document = ReceiptArchive.Document(
            app: app, receiptHash: AppStoreReceiptVerifier.sha256Hex(joined), receiptData: joined,
            answerHash: AppStoreReceiptVerifier.sha256Hex(text), environment: used.rawValue, status: 0,
            answeredAt: transactions.map(\.signedDate).max() ?? Date(), answer: Data(text.utf8)
        )
        let answer = AppStoreAnswer(receiptHash: document.receiptHash, answerHash: document.answerHash, environment: used, status: 0,
                                    answeredAt: document.answeredAt, transactions: signed, renewalInfo: [])
        let recording = try await recordFacts(answer, document: document, app: app, userId: user, deviceId: "", price: nil, currency: nil,
                                              metadata: metadata, logger: logger)
        return (recording, transactions.count, used)
    }

    /// The app's App Store Server API key, nil when it has none; refusals in words.
    func serverAPIKey(of app: String) async throws -> AppStoreServerAPIKey? {
        let stored: AppRegistry.ServerAPIKey?
        do {
            stored = try await registry.serverAPIKey(of: app)
        } catch let error as AccessError {
            throw BackfillError(message: error.message)
        } catch let error as SecretError {
            throw BackfillError(message: error.message)
        }
        guard let stored else { return nil }
        do {
            return try AppStoreServerAPIKey(keyID: stored.keyID, issuerID: stored.issuerID, privateKeyPEM: stored.privateKeyPEM)
        } catch {
            throw BackfillError(message: "the stored App Store Server API key of \(app) cannot be used: \(error.description)")
        }
    }

    /// After a post: a transaction it recorded whose original transaction the stream never saw (a
    /// renewal or a restore of a purchase made before the ledger, or whose post was lost) is looked
    /// up in Apple's history when the app has a Server API key. Best effort: a failure is logged, and
    /// the post stands (`ledger appstore backfill` can do it later).
    func backfillUnknownOrigins(
        of recording: Recording, app: String, user: String, environment: StoreEnvironment, metadata: [String: String], logger: Logger
    ) async -> Recording? {
        let unknown = recording.recorded.compactMap { item -> String? in
            guard let id = item.transactionId, let transaction = recording.state.transactions[id], transaction.position == item.position,
                  transaction.originalTransactionId != id, recording.state.transactions[transaction.originalTransactionId] == nil,
                  !transaction.isFamilyShared
            else { return nil }
            return transaction.originalTransactionId
        }
        guard let original = unknown.first else { return nil }
        do {
            guard let key = try await serverAPIKey(of: app) else { return nil }
            let (backfilled, fetched, _) = try await backfillRecording(
                app: app, user: user, transactionId: original, environment: environment, key: key,
                metadata: metadata.merging(["source": "backfill"]) { $1 }, logger: logger
            )
            logger.info("restore of an unseen purchase: its history fetched from the App Store", metadata: [
                "ledger.app": "\(app)", "ledger.original_transaction": "\(original)", "ledger.fetched": "\(fetched)",
                "ledger.recorded": "\(backfilled.recorded.count)",
            ])
            return backfilled
        } catch {
            logger.warning("restore of an unseen purchase: its history could not be fetched; `ledger appstore backfill` can do it later", metadata: [
                "ledger.app": "\(app)", "ledger.original_transaction": "\(original)", "ledger.error": "\(error)",
            ])
            return nil
        }
    }
}
