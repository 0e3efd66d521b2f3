import AppStore
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import Logging
import ServiceLifecycle

/// The ledger's use cases over memory, wired as `PostgresLedger` wires them over PostgreSQL: the
/// use cases' branches and races, and the HTTP routes (`app.test(.router)`), tested without a
/// database. Reads answer from the projections' own folds over the log (`InMemoryUserReads`).
public struct InMemoryLedger: Sendable {
    public let store: InMemoryEventStore
    public let archive: InMemoryDocumentArchive
    public let inbox: InMemoryNotificationInbox
    public let directory: InMemoryAppDirectory
    public let idempotency: InMemoryIdempotencyRecords
    public let reads: InMemoryUserReads
    public let handler: UserCommandHandler
    public let commands: UserCommands
    public let recordFacts: RecordAppStoreFacts
    public let notifications: TakeInNotification
    public let waitingNotifications: WaitingNotifications
    public let consumptionRequests: ConsumptionRequests
    /// Refund questions answered, with an App Store Server API among the history sources.
    public let answerConsumptionRequests: AnswerConsumptionRequests
    public let appStore: AppStoreQueries
    /// With a history source: the queued fetches of unseen purchases' histories.
    public let origins: OriginBackfills?

    public init(history: (any TransactionHistorySource)? = nil, logger: Logger = Logger(label: "ledger.memory")) {
        let store = InMemoryEventStore()
        let handler = UserCommandHandler(store: store, logger: logger)
        let archive = store.archive
        let inbox = InMemoryNotificationInbox(store: store)
        let directory = InMemoryAppDirectory()
        self.store = store
        self.archive = archive
        self.inbox = inbox
        self.directory = directory
        self.handler = handler
        idempotency = InMemoryIdempotencyRecords()
        reads = InMemoryUserReads(store: store)
        commands = UserCommands(handler: handler)
        let backfill = history.map { BackfillHistory(handler: handler, archive: archive, inbox: inbox, directory: directory, source: $0, logger: logger) }
        let origins = backfill.map { OriginBackfills(backfill: $0, logger: logger) }
        self.origins = origins
        recordFacts = RecordAppStoreFacts(handler: handler, archive: archive, inbox: inbox, origins: origins, logger: logger)
        notifications = TakeInNotification(handler: handler, inbox: inbox, directory: directory, logger: logger)
        waitingNotifications = WaitingNotifications(intake: notifications, logger: logger)
        consumptionRequests = ConsumptionRequests(reader: handler.reader, directory: directory)
        let server = history as? any AppStoreServer
        answerConsumptionRequests = AnswerConsumptionRequests(handler: handler, inbox: inbox, directory: directory, server: server, logger: logger)
        appStore = AppStoreQueries(server: server, backfill: backfill, directory: directory, inbox: inbox, reader: handler.reader, store: store,
                                   logger: logger)
    }

    /// What the HTTP routes call, over this memory. The audit trail is a projection this ledger
    /// does not keep: its routes answer 503 `projections_behind`, as a ledger whose audit trail is
    /// still being built does.
    public func services(verifier: any ReceiptVerifier) -> LedgerServices {
        LedgerServices(
            commands: commands, recordFacts: recordFacts, notifications: notifications, waitingNotifications: waitingNotifications,
            consumptionRequests: consumptionRequests, appStore: appStore,
            reader: handler.reader, store: store, directory: directory, idempotency: idempotency, reads: reads,
            audit: AuditTrailNotKept(), health: InMemoryHealthCheck(store: store), availability: AlwaysAvailable(), verifier: verifier,
            background: origins.map { [OriginBackfillWorker(queue: $0)] } ?? []
        )
    }
}

/// The queue of unseen purchases' histories, worked through while the application runs.
struct OriginBackfillWorker: Service {
    let queue: OriginBackfills

    func run() async throws {
        await cancelWhenGracefulShutdown { await queue.run() }
    }
}

/// The audit routes of an in-memory ledger: no audit trail is kept, as while one is being built.
struct AuditTrailNotKept: AuditReads {
    func events(app: String, filter: AuditFilter, after cursor: AuditCursor?, limit: Int) async throws -> AuditPage { throw AuditQueryError.notReady }
    func summary(app: String, filter: AuditFilter, groupBy: Set<AuditGrouping>) async throws -> [AuditSummaryRow] { throw AuditQueryError.notReady }
    func unclassified(app: String) async throws -> [UnclassifiedProduct] { throw AuditQueryError.notReady }
    func restores(app: String, filter: AuditFilter, after cursor: AuditRestoreCursor?, limit: Int) async throws -> AuditRestorePage {
        throw AuditQueryError.notReady
    }
}

/// Memory does not go down.
struct AlwaysAvailable: DatabaseAvailability {
    var state: DatabaseState { .up }
    func waitUntilDown() async {
        while !Task.isCancelled { try? await Task.sleep(for: .seconds(3_600)) }
    }
    func reportOutage(_ error: any Error) {}
    func isOutage(_ error: any Error) -> Bool { false }
    func isBusy(_ error: any Error) -> Bool { false }
}

/// The in-memory log's head, and no projection to lag behind it.
struct InMemoryHealthCheck: HealthCheck {
    let store: InMemoryEventStore

    func health(thresholds: LedgerHealth.Thresholds) async throws -> LedgerHealth {
        LedgerHealth.judge([], head: await store.events.last?.position ?? 0, holder: nil, thresholds: thresholds)
    }
}
