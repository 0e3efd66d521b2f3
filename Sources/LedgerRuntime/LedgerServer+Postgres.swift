import AppStore
import LedgerApplication
import LedgerHTTP
import LedgerStore
import Logging

extension LedgerServer {
    /// The server over one PostgreSQL database, as `LedgerRuntime.serve` builds it.
    ///
    /// - Parameters:
    ///   - secrets: opens the apps' sealed secrets; nil when no key is configured.
    ///   - serverAPI: where the App Store Server API is, for backfills (it verifies with the
    ///     configuration's signed-payload verifier).
    ///   - monitor: when given (and run as a service), requests are refused at once while the database is down.
    ///   - periodSigner: signs the periods closed over HTTP; by default the key of `$LEDGER_ANCHOR_KEY_FILE`.
    ///   - changes: when given (and run as a service), API keys, projection positions and users'
    ///     entitlement rows are kept in memory, true to the database's announcements.
    public init(
        configuration: Configuration, client: DatabasePool, verifier: any ReceiptVerifier, secrets: SecretSealer? = nil,
        serverAPI: AppStoreServerAPI.Configuration = .init(), monitor: DatabaseMonitor? = nil, changes: ChangeFeed? = nil,
        periodSigner: (any PeriodSigner)? = nil, logger: Logger
    ) {
        let history = AppStoreServerAPI(configuration: serverAPI, verifier: configuration.api.signedPayloads)
        let ledger = PostgresLedger(client: client, secrets: secrets, history: history, changes: changes, logger: logger)
        self.init(configuration: configuration, services: ledger.services(verifier: verifier, client: client, monitor: monitor, periodSigner: periodSigner, logger: logger),
                  logger: logger)
    }
}
