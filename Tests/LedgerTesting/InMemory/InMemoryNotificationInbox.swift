import LedgerApplication
import LedgerDomain

/// `NotificationInbox` over an `InMemoryEventStore`: the same questions the PostgreSQL inbox asks
/// of `ledger.events`, answered by reading the log in position order.
public struct InMemoryNotificationInbox: NotificationInbox {
    let store: InMemoryEventStore

    public init(store: InMemoryEventStore) {
        self.store = store
    }

    public func lookup(
        _ notificationKey: DeduplicationKey?, transactionIDs: [String], app: String, environment: StoreEnvironment
    ) async throws -> NotificationLookup {
        let claims = transactionIDs.flatMap { DeduplicationKey.claimsOf(transactionID: $0, app: app, environment: environment) }
        let found = try await store.recorded((notificationKey.map { [$0] } ?? []) + claims)
        if let key = notificationKey, let earlier = found[key] { return NotificationLookup(earlier: earlier) }
        let first = found.values.sorted { $0.position < $1.position }.first
        return NotificationLookup(holder: first.flatMap { Self.user($0.streamID, app: app) })
    }

    public func holder(ofToken token: String, app: String, environment: StoreEnvironment) async throws -> String? {
        for event in await store.events where event.type == AppStoreTransactionObserved.typeName.stored {
            guard let user = Self.user(event.streamID, app: app),
                  let observed = try? LedgerJSON.decode(AppStoreTransactionObserved.self, from: event.data),
                  observed.environment == environment, observed.fields["appAccountToken"] == token
            else { continue }
            return user
        }
        return nil
    }

    public func waiting(
        app: String, environment: StoreEnvironment, originals: [String], tokens: [String]
    ) async throws -> [AppStoreNotificationReceived] {
        let stream = try StreamID.notifications(app: app).rawValue
        return await store.events.compactMap { event -> AppStoreNotificationReceived? in
            guard event.streamID == stream, let notification = try? LedgerJSON.decode(AppStoreNotificationReceived.self, from: event.data),
                  notification.environment == environment
            else { return nil }
            let original = notification.transaction?["originalTransactionId"] ?? notification.renewalInfo?["originalTransactionId"]
            let token = notification.transaction?["appAccountToken"]
            return original.map(originals.contains) == true || token.map(tokens.contains) == true ? notification : nil
        }
    }

    static func user(_ stream: String, app bundleID: String) -> String? {
        guard case .user(let app, let user) = StreamID.kind(of: stream), app == bundleID else { return nil }
        return user
    }
}
