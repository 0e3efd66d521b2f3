import Foundation
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

    public func holder(ofToken token: String, app: String) async throws -> String? {
        guard let key = try? DeduplicationKey.appAccountToken(app: app, token: token) else { return nil }
        return try await store.recorded([key])[key].flatMap { Self.user($0.streamID, app: app) }
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
            let token = notification.transaction?["appAccountToken"].flatMap(AppAccountToken.normalized)
            return original.map(originals.contains) == true || token.map(tokens.contains) == true ? notification : nil
        }
    }

    public func unclaimed(
        app: String, state: UnclaimedNotification.State, recordedBefore: Date?, limit: Int
    ) async throws -> [UnclaimedNotification] {
        let stream = try StreamID.notifications(app: app).rawValue
        let events = await store.events
        let keys = Set(events.compactMap(\.deduplicationKey))
        var expiredAt: [String: Date] = [:]
        for event in events where event.streamID == stream && event.type == NotificationExpired.typeName.stored {
            if let expired = try? LedgerJSON.decode(NotificationExpired.self, from: event.data) { expiredAt[expired.notificationUUID] = event.recordedAt }
        }
        var found: [UnclaimedNotification] = []
        for event in events where event.streamID == stream && event.type == AppStoreNotificationReceived.typeName.stored
            && event.recordedAt < (recordedBefore ?? .distantFuture) {
            guard let notification = try? LedgerJSON.decode(AppStoreNotificationReceived.self, from: event.data),
                  notification.transaction != nil || notification.renewalInfo != nil
            else { continue }
            let applied = try DeduplicationKey.appStoreTransaction(app: app, environment: notification.environment, kind: .notificationApplied,
                                                                   transactionID: notification.notificationUUID).rawValue
            switch state {
            case .waiting:
                guard !keys.contains(applied), expiredAt[notification.notificationUUID] == nil else { continue }
                found.append(UnclaimedNotification(notification: notification, position: event.position, recordedAt: event.recordedAt))
            case .expired:
                guard let at = expiredAt[notification.notificationUUID] else { continue }
                found.append(UnclaimedNotification(notification: notification, position: event.position, recordedAt: event.recordedAt, expiredAt: at))
            }
        }
        if state == .expired { found.sort { ($0.expiredAt ?? .distantPast) > ($1.expiredAt ?? .distantPast) } }
        return Array(found.prefix(limit))
    }

    public func unansweredConsumptionRequests(recordedAfter: Date, limit: Int) async throws -> [ConsumptionRequestNotice] {
        let events = await store.events
        let keys = Set(events.compactMap(\.deduplicationKey))
        var found: [ConsumptionRequestNotice] = []
        for event in events where event.type == AppStoreNotificationReceived.typeName.stored && event.recordedAt > recordedAfter {
            guard case .user(let app, let user) = StreamID.kind(of: event.streamID),
                  let notification = try? LedgerJSON.decode(AppStoreNotificationReceived.self, from: event.data),
                  notification.notificationType == "CONSUMPTION_REQUEST"
            else { continue }
            let answered = try DeduplicationKey.appStoreTransaction(app: app, environment: notification.environment, kind: .consumptionAnswer,
                                                                    transactionID: notification.notificationUUID).rawValue
            guard !keys.contains(answered) else { continue }
            found.append(ConsumptionRequestNotice(app: app, user: user, notification: notification, position: event.position))
        }
        return Array(found.prefix(limit))
    }

    static func user(_ stream: String, app bundleID: String) -> String? {
        guard case .user(let app, let user) = StreamID.kind(of: stream), app == bundleID else { return nil }
        return user
    }
}
