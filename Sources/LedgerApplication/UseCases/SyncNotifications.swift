import Foundation
import LedgerDomain
import Logging
import Metrics

/// Recovers App Store notifications the webhook never recorded (the ledger down or being deployed
/// while Apple gave up retrying, a proxy that answered for it), from Apple's notification history
/// (App Store Server API): every notification of the window is looked up in the log by its
/// `notificationUUID`, and those the log lacks go through the webhook's own intake
/// (`TakeInNotification`): the same fact, the same routing, the same copies to waiting users. A
/// notification recovered this way and delivered by Apple later is a duplicate, and the other way
/// round.
///
/// A walk covers `[from, to)`: from a little before the last instant every earlier notification
/// was known to be in the log (`overlap`), or `firstLookback` before now on an app's first walk,
/// never further back than Apple keeps (`retention`); to now. Only a whole walk moves that instant,
/// so a walk cut short (a crash, Apple unreachable) loses nothing: the next one walks it again.
public struct SyncNotifications: Sendable {
    public struct Configuration: Sendable {
        public var firstLookback: Duration
        public var overlap: Duration
        /// How far back Apple's history goes, with a margin (Apple: 180 days in production, 30 in the sandbox).
        public var retention: [StoreEnvironment: Duration]
        /// How often the leading server walks every app's history.
        public var interval: Duration

        public init(
            firstLookback: Duration = .seconds(7 * 86_400), overlap: Duration = .seconds(3_600),
            retention: [StoreEnvironment: Duration] = [.production: .seconds(175 * 86_400), .sandbox: .seconds(29 * 86_400)],
            interval: Duration = .seconds(600)
        ) {
            self.firstLookback = firstLookback
            self.overlap = overlap
            self.retention = retention
            self.interval = interval
        }
    }

    /// What a walk found.
    public struct Report: Sendable {
        public let app: String
        public let environment: StoreEnvironment
        public let from: Date
        public let to: Date
        /// Notifications Apple's history listed in the window.
        public var seen = 0
        /// Of those, the ones the log lacked, now recorded.
        public var recovered = 0
        /// Recovered notifications by type.
        public var kinds: [String: Int] = [:]
        /// Notifications of the history that did not verify, with why (never recorded).
        public var refused: [String] = []
    }

    let intake: TakeInNotification
    let server: any AppStoreServer
    let state: any NotificationSyncState
    public let configuration: Configuration
    let logger: Logger

    public init(intake: TakeInNotification, server: any AppStoreServer, state: any NotificationSyncState, configuration: Configuration = .init(),
                logger: Logger) {
        self.intake = intake
        self.server = server
        self.state = state
        self.configuration = configuration
        self.logger = logger
    }

    /// Walks one app's history in one environment; `since` walks from then instead (never before
    /// what Apple keeps). Refusals in words: no key, Apple unreachable or slowing the ledger down.
    public func callAsFunction(app: String, environment: StoreEnvironment, since: Date? = nil, now: Date = Date()) async throws -> Report {
        guard let key = try await intake.directory.serverAPIKey(of: app) else {
            throw BackfillError("\(app) has no App Store Server API key, so its notification history cannot be read: add one with `ledger apps appstore-key \(app) --key-id … --issuer-id … --private-key FILE.p8`")
        }
        let oldest = now - (configuration.retention[environment] ?? .seconds(29 * 86_400)).inSeconds
        let synced = try await state.syncedThrough(app: app, environment: environment)
        let start = since ?? synced.map { $0 - configuration.overlap.inSeconds } ?? (now - configuration.firstLookback.inSeconds)
        var report = Report(app: app, environment: environment, from: max(start, oldest), to: now)
        do {
            var page: String?
            var pages = 0
            repeat {
                let found = try await server.notificationHistory(app: app, environment: environment, key: key, from: report.from, to: report.to, page: page)
                try await take(found, into: &report)
                page = found.hasMore ? found.nextPage : nil
                pages += 1
                if found.hasMore && page == nil { throw TransactionHistoryError.failed("Apple said there is more history but gave no page token") }
            } while page != nil && pages < 100_000
        } catch {
            try? await state.record(NotificationSyncWalk(app: app, environment: environment, from: report.from, to: report.to, syncedThrough: nil,
                                                         seen: report.seen, recovered: report.recovered, error: "\(error)"))
            throw error
        }
        try await state.record(NotificationSyncWalk(app: app, environment: environment, from: report.from, to: report.to, syncedThrough: report.to,
                                                    seen: report.seen, recovered: report.recovered, error: nil))
        if report.recovered > 0 {
            Counter(label: "ledger_notifications_recovered_total", dimensions: [("environment", environment.rawValue)]).increment(by: report.recovered)
            logger.notice("notifications recovered from Apple's history", metadata: [
                "ledger.app": "\(app)", "ledger.environment": "\(environment.rawValue)", "ledger.recovered": "\(report.recovered)",
                "ledger.seen": "\(report.seen)", "ledger.kinds": "\(report.kinds.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))",
            ])
        }
        return report
    }

    /// One page: the notifications the log lacks go through the webhook's intake.
    private func take(_ page: NotificationHistoryPage, into report: inout Report) async throws {
        report.seen += page.items.count + page.refused.count
        report.refused += page.refused
        let keys = try page.items.map {
            try AppStoreNotificationReceived.key(app: report.app, environment: $0.notification.environment, uuid: $0.notification.notificationUUID)
        }
        let known = try await intake.store.recorded(keys)
        for (item, key) in zip(page.items, keys) where known[key] == nil {
            let outcome = try await intake(item.notification, document: item.document, app: report.app,
                                           metadata: ["source": "notification history"])
            guard outcome.kind != .duplicate else { continue }
            report.recovered += 1
            report.kinds[item.notification.notificationType, default: 0] += 1
        }
    }

    /// Every app with a Server API key, in both environments; what went wrong is logged and kept
    /// with the app's sync state (`/health` shows it), never thrown.
    public func walkAll(now: Date = Date()) async -> [Report] {
        var reports: [Report] = []
        let apps: [String]
        do { apps = try await intake.directory.bundleIDs() } catch {
            logger.warning("notification sync: the apps could not be read", metadata: ["ledger.error": "\(error)"])
            return []
        }
        for app in apps {
            guard (try? await intake.directory.serverAPIKey(of: app)) != nil else { continue }
            for environment in [StoreEnvironment.production, .sandbox] {
                do {
                    reports.append(try await self(app: app, environment: environment, now: now))
                } catch {
                    logger.warning("notification sync of an app failed; tried again next time", metadata: [
                        "ledger.app": "\(app)", "ledger.environment": "\(environment.rawValue)", "ledger.error": "\(error)",
                    ])
                }
            }
        }
        return reports
    }
}
