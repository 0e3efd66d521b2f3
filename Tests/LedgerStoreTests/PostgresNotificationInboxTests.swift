import Foundation
import LedgerApplication
import LedgerDomain
import LedgerTesting
@testable import LedgerStore
import Testing

@Suite("The notification inbox finds a notification's earlier record, its transactions' holder and the notifications waiting for a post")
struct PostgresNotificationInboxTests {
    static let app = "com.example.app"

    static func waiting(_ uuid: String, original: String, token: String? = nil, environment: StoreEnvironment) throws -> (AppStoreNotificationReceived, NewEvent) {
        var transaction = ["transactionId": original, "originalTransactionId": original, "productId": "coins", "type": "Consumable"]
        if let token { transaction["appAccountToken"] = token }
        let notification = AppStoreNotificationReceived(
            notificationUUID: uuid, notificationType: "REFUND", subtype: nil, environment: environment, signedDate: Date(timeIntervalSince1970: 1_750_000_000),
            fields: [:], transaction: transaction, renewalInfo: nil, payloadHash: String(repeating: "a", count: 64)
        )
        let key = try AppStoreNotificationReceived.key(app: app, environment: environment, uuid: uuid)
        return (notification, try NewEvent(notification, metadata: [:], deduplicationKey: key))
    }

    @Test("planned per call or prepared, the answers are the same", arguments: [false, true])
    func lookups(prepared: Bool) async throws {
        try await TestDatabase.withDatabase { client, _ in
            if prepared { client.logReach.prepare(from: 0) }
            let store = PostgresEventStore(client: client, logger: TestDatabase.logger)
            let inbox = PostgresNotificationInbox(client: client, logger: TestDatabase.logger)
            let stream = try StreamID.notifications(app: Self.app)
            let token = "6F9619FF-8B86-D011-B42D-00C04FC964FF"
            let (first, firstEvent) = try Self.waiting("n-1", original: "100", token: token, environment: .production)
            let (_, sandboxEvent) = try Self.waiting("n-2", original: "100", environment: .sandbox)
            let (third, thirdEvent) = try Self.waiting("n-3", original: "200", environment: .production)
            _ = try await store.append([firstEvent, sandboxEvent, thirdEvent], to: stream, expecting: .any)
            let bought = try await store.append([try .purchase("300", app: Self.app)], to: try StreamID.user(app: Self.app, user: "alice"), expecting: .any)

            // Waiting: by original transaction, by token (any case), in the environment asked, in log order.
            let byOriginal = try await inbox.waiting(app: Self.app, environment: .production, originals: ["100", "200", "999"], tokens: [])
            #expect(byOriginal.map(\.notificationUUID) == [first.notificationUUID, third.notificationUUID])
            let byToken = try await inbox.waiting(app: Self.app, environment: .production, originals: [], tokens: [token.lowercased()])
            #expect(byToken.map(\.notificationUUID) == ["n-1"])
            #expect(try await inbox.waiting(app: Self.app, environment: .sandbox, originals: ["100"], tokens: []).map(\.notificationUUID) == ["n-2"])
            let many = (0..<40).map { "x\($0)" } + ["200"]
            #expect(try await inbox.waiting(app: Self.app, environment: .production, originals: many, tokens: []).map(\.notificationUUID) == ["n-3"])

            // Lookup: the notification recorded before, else the user holding a transaction.
            let again = try await inbox.lookup(
                try AppStoreNotificationReceived.key(app: Self.app, environment: .production, uuid: "n-3"), transactionIDs: ["300"],
                app: Self.app, environment: .production
            )
            #expect(again.earlier?.streamID == stream.rawValue && again.holder == nil)
            let held = try await inbox.lookup(
                try AppStoreNotificationReceived.key(app: Self.app, environment: .sandbox, uuid: "n-9"), transactionIDs: ["300"],
                app: Self.app, environment: .sandbox
            )
            #expect(held.earlier == nil && held.holder == "alice", "\(bought)")
            let nobody = try await inbox.lookup(nil, transactionIDs: ["301"], app: Self.app, environment: .sandbox)
            #expect(nobody == NotificationLookup())
            #expect((client.preparedStatements.count > 0) == prepared)
        }
    }
}
