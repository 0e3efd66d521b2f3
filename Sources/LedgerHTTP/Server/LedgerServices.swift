import AppStore
import LedgerApplication
import ServiceLifecycle

/// What the routes call: the use cases, and the read sides and directories they answer from,
/// each behind the application's protocols. `LedgerRuntime` builds them over PostgreSQL; tests
/// build them over memory. A route parses, authorizes, calls one of these and maps the answer.
public struct LedgerServices: Sendable {
    /// The app's own commands on a user's stream, and the catalog.
    public let commands: UserCommands
    /// A verified receipt's or signed transaction's facts.
    public let recordFacts: RecordAppStoreFacts
    /// Apple's notifications.
    public let notifications: TakeInNotification
    /// What becomes of notifications no user took yet, and their listing.
    public let waitingNotifications: WaitingNotifications
    /// Apple's refund questions, with the log's figures.
    public let consumptionRequests: ConsumptionRequests
    /// Questions to Apple's App Store Server API: orders, subscription statuses, test notifications.
    public let appStore: AppStoreQueries
    /// The user's stream itself (history) and the catalog, as the log holds them.
    public let reader: UserStreamReader
    public let store: any EventStore
    public let directory: any AppDirectory
    public let idempotency: any IdempotencyRecords
    public let reads: any UserReads
    public let audit: any AuditReads
    public let health: any HealthCheck
    /// Whether the database answers; requests that need it are refused at once while it does not.
    public let availability: any DatabaseAvailability
    /// Apple's `verifyReceipt`.
    public let verifier: any ReceiptVerifier
    /// The ledger beside Apple's sales reports; nil where no store of reports is wired (memory).
    public let reconciliation: ReconcileSalesReports?
    /// Closed periods and their adjustments; nil where none are kept (memory).
    public let periods: ClosePeriods?
    /// Signs closes asked for over HTTP: the anchor key, when the server was given one.
    public let periodSigner: (any PeriodSigner)?
    /// Subscription metrics; nil where none are read (memory).
    public let metrics: ReadMetrics?
    /// The apps' change feeds; nil where none is kept (memory).
    public let changes: FollowChanges?
    /// The apps' webhook endpoints and their deliveries; nil where none are kept (memory).
    public let webhooks: ManageWebhooks?
    /// Work the server runs beside its requests (the queued fetches of unseen purchases'
    /// histories): `LedgerServer.application` runs them with the server.
    public let background: [any Service]

    public init(
        commands: UserCommands, recordFacts: RecordAppStoreFacts, notifications: TakeInNotification, waitingNotifications: WaitingNotifications,
        consumptionRequests: ConsumptionRequests, appStore: AppStoreQueries, reader: UserStreamReader, store: any EventStore, directory: any AppDirectory,
        idempotency: any IdempotencyRecords, reads: any UserReads, audit: any AuditReads, health: any HealthCheck,
        availability: any DatabaseAvailability, verifier: any ReceiptVerifier, reconciliation: ReconcileSalesReports? = nil,
        periods: ClosePeriods? = nil, periodSigner: (any PeriodSigner)? = nil, metrics: ReadMetrics? = nil, changes: FollowChanges? = nil,
        webhooks: ManageWebhooks? = nil, background: [any Service] = []
    ) {
        self.commands = commands
        self.recordFacts = recordFacts
        self.notifications = notifications
        self.waitingNotifications = waitingNotifications
        self.consumptionRequests = consumptionRequests
        self.appStore = appStore
        self.reader = reader
        self.store = store
        self.directory = directory
        self.idempotency = idempotency
        self.reads = reads
        self.audit = audit
        self.health = health
        self.availability = availability
        self.verifier = verifier
        self.reconciliation = reconciliation
        self.periods = periods
        self.periodSigner = periodSigner
        self.metrics = metrics
        self.changes = changes
        self.webhooks = webhooks
        self.background = background
    }
}
