import LedgerApplication
import Logging

/// The ledger's use cases over one PostgreSQL database: the store's implementations of the
/// application's protocols, wired once, for whoever calls the use cases (the HTTP server, the
/// command line, the demo, the seeder).
public struct PostgresLedger: Sendable {
    public let store: PostgresEventStore
    public let handler: UserCommandHandler
    public let archive: PostgresDocumentArchive
    public let inbox: PostgresNotificationInbox
    public let registry: AppRegistry
    public let idempotency: IdempotencyStore
    public let reads: UserReadModels
    public let audit: AuditQueries
    public let commands: UserCommands
    /// Records a verified receipt's, signed transaction's or Apple history's facts; with a history
    /// source, also Apple's history of any purchase a post renews or restores that the stream never saw.
    public let recordFacts: RecordAppStoreFacts
    public let notifications: TakeInNotification
    /// Notifications no user took yet: passed on when their user appears, expired when none does.
    public let waitingNotifications: WaitingNotifications
    /// Recovers notifications from Apple's notification history; nil without the App Store Server API.
    public let syncNotifications: SyncNotifications?
    /// The App Store Server API's other calls (statuses, consumption answers, orders, test
    /// notifications); nil without it.
    public let appStoreServer: (any AppStoreServer)?
    /// Nil without a history source.
    public let backfill: BackfillHistory?
    /// The fetches of unseen purchases' histories that posts queue; its `run` must run (a
    /// background service of the server). Nil without a history source.
    public let origins: OriginBackfills?
    public let consumptionRequests: ConsumptionRequests
    /// Answers Apple's refund questions (run by the server that leads the projections).
    public let answerConsumptionRequests: AnswerConsumptionRequests
    /// Orders, subscription statuses and test notifications, asked of Apple.
    public let appStoreQueries: AppStoreQueries
    /// Apple's sales reports: kept, recorded, and the ledger's side of a reconciliation.
    public let salesReports: PostgresSalesReports
    public let importSalesReports: ImportSalesReports
    public let reconcileSalesReports: ReconcileSalesReports
    /// Closed periods: figures frozen as signed facts, and the adjustments learned since.
    public let closePeriods: ClosePeriods
    /// MRR, actives and their movement, trials, churn, refund rates and cohorts.
    public let metrics: ReadMetrics
    public let exchangeRates: PostgresExchangeRates
    /// The app's change feed, as its servers follow it.
    public let followChanges: FollowChanges
    /// Webhook endpoints, their deliveries and attempts (the leading server's `WebhookDelivery` works them).
    public let webhookStore: PostgresWebhooks
    /// Adds, lists and removes webhook endpoints, shows their deliveries, sends deliveries again.
    public let webhooks: ManageWebhooks

    /// - Parameters:
    ///   - secrets: opens the apps' sealed secrets; nil when no key is configured.
    ///   - history: Apple's App Store Server API, for backfills; nil for none.
    ///   - changes: what a running `ChangeFeed` keeps in memory (accepted keys, the projection
    ///     registry, users' entitlement rows), so that reads cost one query; nil asks the database every time.
    public init(
        client: DatabasePool, secrets: SecretSealer? = nil, history: (any TransactionHistorySource)? = nil, changes: ChangeFeed? = nil,
        logger: Logger
    ) {
        let store = PostgresEventStore(client: client, logger: logger)
        let handler = UserCommandHandler(store: store, logger: logger)
        let archive = PostgresDocumentArchive(client: client, logger: logger)
        let inbox = PostgresNotificationInbox(client: client, logger: logger)
        let registry = AppRegistry(client: client, logger: logger, secrets: secrets, acceptedKeys: changes?.keys)
        self.store = store
        self.handler = handler
        self.archive = archive
        self.inbox = inbox
        self.registry = registry
        idempotency = IdempotencyStore(client: client, logger: logger)
        reads = UserReadModels(client: client, board: changes?.projections, cache: changes?.entitlements, logger: logger)
        audit = AuditQueries(client: client, logger: logger)
        commands = UserCommands(handler: handler)
        backfill = history.map {
            BackfillHistory(handler: handler, archive: archive, inbox: inbox, directory: registry, source: $0, logger: logger)
        }
        origins = backfill.map { OriginBackfills(backfill: $0, logger: logger) }
        recordFacts = RecordAppStoreFacts(handler: handler, archive: archive, inbox: inbox, origins: origins, logger: logger)
        let intake = TakeInNotification(handler: handler, inbox: inbox, directory: registry, logger: logger)
        notifications = intake
        waitingNotifications = WaitingNotifications(intake: intake, logger: logger)
        let server = history as? any AppStoreServer
        appStoreServer = server
        syncNotifications = server.map {
            SyncNotifications(intake: intake, server: $0, state: PostgresNotificationSyncState(client: client, logger: logger), logger: logger)
        }
        consumptionRequests = ConsumptionRequests(reader: handler.reader, directory: registry)
        answerConsumptionRequests = AnswerConsumptionRequests(handler: handler, inbox: inbox, directory: registry, server: server, logger: logger)
        appStoreQueries = AppStoreQueries(server: server, backfill: backfill, directory: registry, inbox: inbox, reader: handler.reader, store: store,
                                          logger: logger)
        salesReports = PostgresSalesReports(client: client, logger: logger)
        importSalesReports = ImportSalesReports(store: store, archive: salesReports, directory: registry, logger: logger)
        reconcileSalesReports = ReconcileSalesReports(reports: importSalesReports, reads: salesReports, reader: handler.reader, directory: registry,
                                                      settings: salesReports)
        closePeriods = ClosePeriods(store: store, periods: PostgresPeriods(client: client, logger: logger), proceeds: audit.proceeds,
                                    directory: registry)
        exchangeRates = PostgresExchangeRates(client: client, logger: logger)
        webhookStore = PostgresWebhooks(client: client, secrets: secrets, logger: logger)
        webhooks = ManageWebhooks(store: webhookStore, directory: registry)
        metrics = ReadMetrics(reads: PostgresMetrics(client: client, logger: logger), reader: handler.reader, directory: registry,
                              periods: closePeriods, rates: exchangeRates)
        followChanges = FollowChanges(reads: PostgresChangeReads(client: client, signal: changes?.feed, logger: logger))
    }
}
