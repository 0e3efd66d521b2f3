import Foundation
import LedgerApplication
@testable import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

/// A database written before the facts were kept: version-1 verdict events, and an audit trail of
/// the older version, with its older columns, live. The new version answers the same except where
/// a fix changes the answer, and the dry run lists exactly those rows.
@Suite("A database from before the facts: upcast, and the dry run names what the fixes change")
struct UpgradeReplayTests {
    static let app = "com.example.before"

    /// The audit trail as the code before the facts wrote it (version 2): without `price_source`,
    /// `catalog_price` and `offer`, and with a price only where the device reported one, so the
    /// renewals the App Store added were unpriced.
    enum AuditTrailBeforeTheFacts: UserProjection {
        struct Row: ProjectionRow {
            let columnValues: [String?]
        }

        static var name: ProjectionName { AuditTrailProjection.name }
        static var version: Int { AuditTrailProjection.version - 1 }
        static let dropped: Set<String> = ["price_source", "catalog_price", "offer"]
        static var columns: [ProjectionColumn] { AuditTrailProjection.columns.filter { !dropped.contains($0.name) } }
        static var keyColumns: [String] { AuditTrailProjection.keyColumns }
        static var indexes: [[String]] { AuditTrailProjection.indexes }

        static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
            let names = AuditTrailProjection.columns.map(\.name)
            return AuditTrailProjection.columnValues(app: app, user: user, state: state, catalog: catalog).map { values in
                var row = Dictionary(uniqueKeysWithValues: zip(names, values))
                if row["price_source"] != "device" {
                    row["price"] = .some(nil)
                    row["currency"] = .some(nil)
                }
                return Row(columnValues: columns.map { row[$0.name] ?? nil })
            }
        }
    }

    static func date(_ text: String) -> Date { LedgerJSON.parseTimestamp(text)! }

    @Test("version-1 events: the same rows but the renewals, which the catalog now prices; new columns are not differences")
    func versionOneDatabase() async throws {
        try await TestDatabase.withDatabase { client, _ in
            let handler = UserCommandHandler(store: PostgresEventStore(client: client, logger: TestDatabase.logger), logger: TestDatabase.logger)
            try await handler.defineProduct(try Product(productId: "levels", type: .nonConsumable, prices: ["USD": "4.99"]), app: Self.app)
            try await handler.defineProduct(try Product(productId: "pro", type: .autoRenewable, duration: ISODuration(parsing: "P1M"),
                                                        prices: ["USD": "2.99"]), app: Self.app)
            // What the ledger recorded before: verdicts, with the device's price on what it bought.
            _ = try await handler.execute(app: Self.app, user: "u1") { _, _ in
                ([
                    PendingEvent(.deviceRegistered(DeviceRegistered(deviceId: "phone"))),
                    PendingEvent(.purchaseRecorded(PurchaseRecorded(
                        transactionId: "1", originalTransactionId: "1", productId: "levels", productType: .nonConsumable, quantity: 1,
                        purchaseDate: Self.date("2025-01-01T00:00:00Z"), environment: .production, deviceId: "phone",
                        price: "4.99", currency: "USD", receiptHash: "h1"))),
                    PendingEvent(.purchaseRecorded(PurchaseRecorded(
                        transactionId: "10", originalTransactionId: "10", productId: "pro", productType: .autoRenewable, quantity: 1,
                        purchaseDate: Self.date("2025-01-02T00:00:00Z"), expiresDate: Self.date("2025-02-02T00:00:00Z"),
                        environment: .production, deviceId: "phone", price: "2.99", currency: "USD", receiptHash: "h2"))),
                    PendingEvent(.subscriptionRenewed(SubscriptionRenewed(
                        transactionId: "11", originalTransactionId: "10", productId: "pro", purchaseDate: Self.date("2025-02-02T00:00:00Z"),
                        expiresDate: Self.date("2025-03-02T00:00:00Z"), environment: .production, receiptHash: "h3"))),
                    PendingEvent(.purchaseRestored(PurchaseRestored(
                        transactionId: "2", originalTransactionId: "1", productId: "levels", deviceId: "tablet",
                        purchaseDate: Self.date("2025-02-03T00:00:00Z"), environment: .production, receiptHash: "h4"))),
                ], ())
            }
            let rebuilder = ProjectionRebuilder(client: client, logger: TestDatabase.logger)
            _ = try await rebuilder.rebuild(AuditTrailBeforeTheFacts.self, dryRun: false)
            let oldColumns = try await client.query(
                "SELECT count(*) FROM information_schema.columns WHERE table_schema = 'ledger' AND table_name = \(AuditTrailBeforeTheFacts.tableName)",
                logger: TestDatabase.logger
            ).collect()
            #expect(try oldColumns.first?.decode(Int.self) == AuditTrailBeforeTheFacts.columns.count + 2)

            let report = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: true)
            #expect(report.liveVersion == AuditTrailBeforeTheFacts.version)
            let differences = report.differences ?? []
            // Only the renewal changes: the catalog's price in force then, where there was none.
            #expect(differences.count == 1, "\(differences)")
            let renewal = try #require(differences.first)
            #expect(renewal.change == .changed && renewal.user == "u1")
            #expect(renewal.before?["transaction_id"] == "11" && renewal.before?["event"] == "renewal")
            #expect(renewal.before?["price"] == .some(nil) && renewal.after?["price"] == "2.99")
            #expect(renewal.before?["currency"] == .some(nil) && renewal.after?["currency"] == "USD")
            #expect(renewal.after?.keys.contains("price_source") == false, "columns the old version lacks are not compared")
            #expect(renewal.lines == [
                "changed \(Self.app)/u1 transaction 11 (event='renewal' position='\(renewal.key["position"].flatMap { $0 } ?? "")')",
                "    currency: NULL -> 'USD'",
                "    price: NULL -> '2.99'",
            ])

            // Without --dry-run it switches, and the view has the new columns.
            _ = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: false)
            let sources = try await client.query(
                "SELECT transaction_id, event, price_source FROM ledger.audit_trail ORDER BY position, event", logger: TestDatabase.logger
            ).collect()
            #expect(try sources.map { try $0.decode((String, String, String).self) }.map { "\($0.0) \($0.1) \($0.2)" }
                    == ["1 purchase device", "10 purchase device", "11 renewal catalog"])
        }
    }
}
