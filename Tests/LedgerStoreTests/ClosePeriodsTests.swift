import Foundation
import LedgerApplication
import LedgerDomain
import LedgerProjections
@testable import LedgerStore
import LedgerTesting
import PostgresNIO
import Testing

/// Finance closes a month; what the ledger learns later never moves it, and shows as adjustments
/// naming their cause, booked in the month the ledger learned of them.
@Suite struct ClosePeriodsTests {
    static let app = "com.example.close"
    static func date(_ text: String) -> Date { LedgerJSON.parseTimestamp(text)! }

    static func signer() throws -> AnchorSigningKey {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("close-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return try AnchorSigningKey.create(at: directory.appendingPathComponent("anchor.key").path)
    }

    /// The audit trail as a fold with a bug wrote it: `levels` a dollar dearer than it was sold.
    enum AuditTrailWithABug: UserProjection {
        struct Row: ProjectionRow {
            let columnValues: [String?]
        }

        static var name: ProjectionName { AuditTrailProjection.name }
        static var version: Int { AuditTrailProjection.version - 1 }
        static var columns: [ProjectionColumn] { AuditTrailProjection.columns }
        static var keyColumns: [String] { AuditTrailProjection.keyColumns }
        static var indexes: [[String]] { AuditTrailProjection.indexes }

        static func rows(app: String, user: String, state: UserLedger, catalog: ProductCatalog) -> [Row] {
            let names = AuditTrailProjection.columns.map(\.name)
            return AuditTrailProjection.columnValues(app: app, user: user, state: state, catalog: catalog).map { values in
                var row = Dictionary(uniqueKeysWithValues: zip(names, values))
                if row["product_id"] == "levels", let amount = row["amount"] ?? nil, let value = Decimal(string: amount) {
                    row["amount"] = .some("\(value + 1)")
                }
                return Row(columnValues: names.map { row[$0] ?? nil })
            }
        }
    }

    @Test func aClosedMonthKeepsItsFiguresAndLaterChangesAreAdjustmentsNamingTheirCause() async throws {
        try await TestDatabase.withDatabase { client, settings in
            let ledger = PostgresLedger(client: client, logger: TestDatabase.logger)
            #expect(try await ledger.registry.addApp(Self.app, sharedSecret: nil))
            let handler = ledger.handler
            try await handler.defineProduct(try Product(productId: "coins", type: .consumable), app: Self.app)
            try await handler.defineProduct(try Product(productId: "levels", type: .nonConsumable), app: Self.app)
            // A September purchase, and October's: 3 coins at 0.99, levels at 4.99, 2 coins at 1.09 EUR.
            let sales: [(String, String, String, Int, String, String, String)] = [
                ("sep", "s1", "levels", 1, "2026-09-20T10:00:00Z", "4.99", "USD"),
                ("ann", "o1", "coins", 3, "2026-10-03T10:00:00Z", "0.99", "USD"),
                ("bob", "o2", "levels", 1, "2026-10-10T10:00:00Z", "4.99", "USD"),
                ("eve", "o3", "coins", 2, "2026-10-31T23:30:00Z", "1.09", "EUR"),
            ]
            for (user, id, product, quantity, time, price, currency) in sales {
                try await AuditQueriesTests.record(handler, app: Self.app, user: user,
                                                   AuditQueriesTests.purchase(id, product, quantity: quantity, at: time), price: price, currency: currency)
            }
            // October is closed while a fold with a bug is live: it takes a dollar too many for `levels`.
            let rebuilder = ProjectionRebuilder(client: client, logger: TestDatabase.logger)
            _ = try await rebuilder.rebuild(AuditTrailWithABug.self, dryRun: false)

            let periods = ledger.closePeriods
            let key = try Self.signer()
            // A month not over yet cannot be closed; October can.
            await #expect(throws: PeriodError.self) {
                try await periods.close(app: Self.app, period: "2026-11", closedBy: "test", signer: key, now: Self.date("2026-11-26T12:00:00Z"))
            }
            let closed = try await periods.close(app: Self.app, period: "2026-10", closedBy: "test", signer: key)
            #expect(closed.state == .closed && closed.signatureValid)
            let usd = try #require(closed.figures.first { $0.currency == "USD" && $0.productId == "coins" })
            #expect(usd.purchases == 1 && usd.units == 3 && usd.gross == "2.97" && usd.net == "2.97")
            #expect(closed.figures.map(\.productId).sorted() == ["coins", "coins", "levels"], "September's sale is not October's")
            let error = await #expect(throws: PeriodError.self) { try await periods.close(app: Self.app, period: "2026-10", closedBy: "test", signer: key) }
            #expect(error?.code == .periodClosed)
            #expect(try await periods.adjustments(app: Self.app, period: "2026-10").isEmpty, "nothing learned since")

            // Learned after the close: Apple refunded September's purchase on 20 October; then the fixed
            // fold is replayed and switched to (no new fact), and sees bob's October row at its price.
            _ = try await handler.execute(app: Self.app, user: "sep") { state, _ in
                (try UserDecisions.revoke(transactionId: "s1", revokedAt: Self.date("2026-10-20T09:00:00Z"), reason: "refund", on: state), ())
            }
            let replay = try await rebuilder.rebuild(AuditTrailProjection.self, dryRun: false)
            #expect(replay.version == AuditTrailProjection.version)

            // October's figures are as closed, whatever the trail says now.
            let after = try #require(try await periods.status(app: Self.app, period: "2026-10"))
            #expect(after.figures == closed.figures && after.closePosition == closed.closePosition)
            let adjustments = try await periods.adjustments(app: Self.app, period: "2026-10")
            #expect(adjustments.count == 2, "\(adjustments)")
            let thisMonth = try ClosePeriods.month(of: Date(), timeZone: "UTC")
            let refund = try #require(adjustments.first { $0.transactionId == "s1" })
            #expect(refund.kind == .added && refund.event == "refund" && refund.netChange == "-4.99" && refund.amountAfter == "4.99")
            #expect(refund.cause.kind == .fact && refund.cause.type == "PurchaseRevoked.v1" && refund.cause.position == refund.position)
            #expect(refund.bookedIn == thisMonth && refund.closedPeriod == "2026-10", "booked in the month the ledger learned of it")
            let fixed = try #require(adjustments.first { $0.transactionId == "o2" })
            #expect(fixed.kind == .changed && fixed.amountBefore == "5.99" && fixed.amountAfter == "4.99" && fixed.netChange == "-1")
            #expect(fixed.cause.kind == .replay && fixed.bookedIn > "2026-10")
            #expect(fixed.cause.message.contains("rebuilt by its fold v\(AuditTrailProjection.version) (the close read v\(AuditTrailWithABug.version))"))

            // The metrics answer October's money from its close plus the two adjustments, and say so; September is live.
            let metrics = try await ledger.metrics.metrics(app: Self.app, environment: .production, from: Self.date("2026-09-01T00:00:00Z"),
                                                           to: Self.date("2026-11-01T00:00:00Z"), byMonth: true)
            let money = metrics.refunds.map { "\($0.interval) \($0.currency) \($0.payments)/\($0.refunds) \($0.gross)/\($0.refunded) \($0.basis.rawValue) \($0.adjustments ?? 0)" }
            #expect(money == ["2026-09 USD 1/0 4.99/0 live 0", "2026-10 EUR 1/0 2.18/0 closed 0", "2026-10 USD 2/1 7.96/4.99 closed 2"])
            #expect(metrics.refunds.filter { $0.basis == .closed }.allSatisfy { $0.closedAt == closed.closedAt })

            // Reopening is a fact too; the first close stays in the log, and a new close takes the trail as it is now.
            let reopened = try await periods.reopen(app: Self.app, period: "2026-10", reason: "the refund belongs to October", reopenedBy: "test")
            #expect(reopened.state == .reopened && reopened.history.count == 2)
            let again = try await periods.close(app: Self.app, period: "2026-10", closedBy: "test", signer: key)
            #expect(again.closeId != closed.closeId && again.history.count == 3)
            let levels = try #require(again.figures.first { $0.productId == "levels" })
            #expect(levels.gross == "4.99" && levels.refunds == 1 && levels.refundedAmount == "4.99" && levels.net == "0")
            #expect(try await periods.adjustments(app: Self.app, period: "2026-10").isEmpty)
            #expect(try await HashChainVerifier(client: client, logger: TestDatabase.logger).verify().isIntact, "the log verifies")

            // The kept rows cannot be changed.
            await #expect(throws: PSQLError.self) {
                try await client.query("DELETE FROM ledger.closed_period_rows", logger: TestDatabase.logger)
            }
        }
    }
}
