import AppStore
import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
import LedgerStore
import Logging
import PostgresNIO

/// The replay story: a classification rule with a bug, fixed in a new fold version, and the past
/// answers fixed by a rebuild, with the dry run naming exactly the finance rows that change.
///
/// It swaps the audit trail's live version, so it runs on a scratch database of its own (created
/// on the same PostgreSQL server and dropped at the end), never on the ledger's. There it records
/// the facts of the restore story's receipts, verified again with the App Store (the simulator),
/// as the receipts route records them. Then:
/// 1. `audit_trail` v(n−1) is built by a fold with the bug the classifier's version 2 fixed
///    (`TransactionClassifier.Rules.version1`: no "one payment per web order", so each restored
///    period is booked as another paid renewal), and made live;
/// 2. the fixed fold, `audit_trail` v(n) as this ledger ships it, is rebuilt as a dry run: the
///    differences are what `ledger projections rebuild audit_trail --dry-run` prints;
/// 3. it is rebuilt for real and switched over, and the rows are read back through the view.
public struct ReplayStory: Sendable {
    /// What the replay showed.
    public struct Result: Sendable {
        /// The live rows before (the bug's) and after the switch: event, transaction id, amount.
        public let rowsBefore: [AuditLine]
        public let rowsAfter: [AuditLine]
        public let differences: [ProjectionRebuilder.Difference]
        public let liveVersionBefore: Int
        public let liveVersionAfter: Int
    }

    public struct AuditLine: Sendable, Hashable, CustomStringConvertible {
        public let event: String
        public let transactionId: String
        public let amount: String?

        public var description: String { "\(event) \(transactionId) \(amount ?? "unpriced")" }
    }

    /// `audit_trail` as a fold with the bug: the current projection's rows over transactions
    /// judged by the version-1 rules. One version below the shipped one, as the code before the fix.
    public enum AuditTrailWithTheBug: UserProjection {
        public typealias Row = AuditTrailProjection.Row
        public static var name: ProjectionName { AuditTrailProjection.name }
        public static var version: Int { AuditTrailProjection.version - 1 }
        public static var columns: [ProjectionColumn] { AuditTrailProjection.columns }
        public static var keyColumns: [String] { AuditTrailProjection.keyColumns }
        public static var indexes: [[String]] { AuditTrailProjection.indexes }

        public static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
            AuditTrailProjection.rows(app: app, user: user, state: state.classified(by: catalog, rules: .version1), catalog: catalog)
        }
    }

    let server: DatabaseRoles
    let verifier: AppStoreReceiptVerifier
    let sharedSecret: String?
    let bundleId: String
    let logger: Logger
    let printer: @Sendable (String) -> Void

    /// `server` is where the scratch database is created (its own database is left alone).
    public init(
        server: DatabaseRoles, verifier: AppStoreReceiptVerifier, sharedSecret: String?, bundleId: String,
        logger: Logger, printer: @escaping @Sendable (String) -> Void = { _ in }
    ) {
        self.server = server
        self.verifier = verifier
        self.sharedSecret = sharedSecret
        self.bundleId = bundleId
        self.logger = logger
        self.printer = printer
    }

    /// Replays `story`'s receipts (the restore story's) into a scratch database and tells the fix.
    public func run(replaying story: StoryResult) async throws -> Result {
        let product = try Product(productId: DemoStories.Product.proMonthly, type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                  prices: ["USD": "4.99"])
        printer("")
        printer("== Replay: a classification bug fixed in a new fold version, and the past answers fixed by a rebuild ==")
        let scratch = "\(server.runtime.database.prefix(40))_replay_\(UInt32.random(in: 0...UInt32.max))"
        printer("1. A scratch database, \(scratch), on the same server: the story swaps a projection's live version, so it never does that to the ledger's own")
        let roles = try await server.recreate(database: scratch, logger: logger)
        do {
            let result = try await LedgerDatabase.withClient(roles.runtime, logger: logger) { client in
                try await record(story, product: product, client: client)
                return try await replay(client: client, user: story.userId)
            }
            try await server.drop(database: scratch, logger: logger)
            printer("   Scratch database dropped.")
            return result
        } catch {
            try? await server.drop(database: scratch, logger: logger)
            throw error
        }
    }

    /// The story's receipts, verified again and recorded as facts, as the receipts route does.
    private func record(_ story: StoryResult, product: Product, client: DatabasePool) async throws {
        let ledger = PostgresLedger(client: client, logger: logger)
        _ = try await ledger.commands.defineProduct(product, app: bundleId, metadata: ["source": "ledger demo"])
        for posted in story.receipts {
            let receipt = try await verifier.verify(
                ReceiptVerificationRequest(receiptData: posted.receipt, sharedSecret: sharedSecret.map(SharedSecret.init)), logger: logger
            )
            let post = RecordAppStoreFacts.Post(app: bundleId, userId: story.userId, deviceId: posted.deviceId, price: posted.price,
                                                currency: posted.price == nil ? nil : "USD", metadata: ["source": "ledger demo"])
            _ = try await ledger.recordFacts(receipt.appStoreAnswer, document: receipt.document(app: bundleId, receiptData: posted.receipt), post: post)
        }
        printer("2. \(story.receipts.count) receipts of \(story.userId) verified again and recorded there as facts, as the receipts route records them")
    }

    private func replay(client: DatabasePool, user: String) async throws -> Result {
        let rebuilder = ProjectionRebuilder(client: client, logger: logger)
        _ = try await rebuilder.rebuild(AuditTrailWithTheBug.self, dryRun: false)
        let before = try await rows(client)
        printer("3. audit_trail v\(AuditTrailWithTheBug.version) is live, built by a fold with a bug: no \"one payment per web order\", so each restored period is another paid renewal")
        for row in before { printer("     \(row)") }

        printer("4. The rule fixed in v\(AuditTrailProjection.version); the engineer runs: ledger projections rebuild audit_trail --dry-run")
        let dryRun = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: true)
        let differences = dryRun.differences ?? []
        printer("     audit_trail v\(dryRun.version) (dry run) against live v\(dryRun.liveVersion.map(String.init) ?? "none") at position \(dryRun.position): \(differences.count) rows differ")
        for difference in differences {
            for line in difference.lines { printer("       " + line) }
        }

        let switched = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: false)
        let after = try await rows(client)
        printer("5. Without --dry-run: v\(switched.version) is rebuilt and live; \(user)'s audit trail now reads")
        for row in after { printer("     \(row)") }
        return Result(rowsBefore: before, rowsAfter: after, differences: differences,
                      liveVersionBefore: AuditTrailWithTheBug.version, liveVersionAfter: switched.version)
    }

    /// The live audit trail (every environment), as finance reads it, in log order.
    private func rows(_ client: DatabasePool) async throws -> [AuditLine] {
        var lines: [AuditLine] = []
        try await AuditQueries(client: client, logger: logger).forEachEvent(app: bundleId, filter: AuditFilter(environment: .all)) { row in
            lines.append(AuditLine(event: row.event.rawValue, transactionId: row.transactionId, amount: row.amount))
        }
        return lines
    }
}
