import Foundation
import LedgerDomain
import Logging
import Metrics

/// Answers Apple's refund questions. When a customer asks Apple for a refund, Apple sends a
/// CONSUMPTION_REQUEST and takes, for 12 hours, the app's account of the purchase (Send
/// Consumption Information): whether it was delivered, how much of it was used, the app's refund
/// preference. The ledger answers from the user's facts, and only when the app reported that the
/// user consented (`ConsumptionConsentRecorded`); what it sent and Apple's answer are recorded on
/// the user's stream (`ConsumptionInformationSent`), once per request.
///
/// The server that leads the projections runs `sweep` now and then: every request of the window
/// with no answer recorded is looked at again, so a request whose consent came later, or whose
/// sending failed (Apple unreachable, slowing the ledger down), is answered by a later pass while
/// Apple still takes it. A request Apple refused (a 400) is recorded with Apple's refusal and not
/// sent again: the same body would get the same answer.
public struct AnswerConsumptionRequests: Sendable {
    public struct Configuration: Sendable {
        /// How long Apple takes an answer after its request (12 hours).
        public var window: Duration
        /// How often the leading server looks for requests to answer.
        public var interval: Duration
        /// Requests looked at per pass.
        public var batch: Int

        public init(window: Duration = .seconds(12 * 3_600), interval: Duration = .seconds(60), batch: Int = 200) {
            self.window = window
            self.interval = interval
            self.batch = batch
        }
    }

    /// What the ledger does with one request.
    public enum Plan: Sendable, Hashable {
        /// Answered already: what was sent, and Apple's answer.
        case answered(UserLedger.ConsumptionAnswer)
        /// To be sent now.
        case send(transactionId: String, environment: StoreEnvironment, information: ConsumptionInformation)
        /// Not answered, and why.
        case notAnswered(String)
    }

    /// What one pass did.
    public struct Pass: Sendable, Hashable {
        public var accepted = 0
        public var refused = 0
        /// Sending failed (Apple unreachable, a 429): tried again by the next pass.
        public var failed = 0
        /// Not to be answered (no consent, switched off, past Apple's window, …).
        public var notAnswered = 0

        public init() {}
    }

    let handler: UserCommandHandler
    let inbox: any NotificationInbox
    let directory: any AppDirectory
    let server: (any AppStoreServer)?
    public let configuration: Configuration
    let logger: Logger

    public init(
        handler: UserCommandHandler, inbox: any NotificationInbox, directory: any AppDirectory, server: (any AppStoreServer)?,
        configuration: Configuration = .init(), logger: Logger
    ) {
        self.handler = handler
        self.inbox = inbox
        self.directory = directory
        self.server = server
        self.configuration = configuration
        self.logger = logger
    }

    /// What the ledger does with the request `notification` of the user whose stream is `state`:
    /// a pure function of the facts, the app's settings and the time.
    public static func plan(
        for notification: TransactionFacts.Notification, state: UserLedger, settings: ConsumptionAnswerSettings, hasKey: Bool,
        now: Date, window: Duration = Configuration().window
    ) -> Plan {
        if let answer = state.consumptionAnswers[notification.uuid] { return .answered(answer) }
        guard settings.answering else {
            return .notAnswered("the app switched answering Apple's refund questions off (`ledger apps consumption-answers APP --on` switches it on)")
        }
        switch state.consumptionConsent {
        case nil:
            return .notAnswered("the app has not reported whether the user consented (PUT …/users/{userId}/consumption-consent); Apple takes consumption information only with the customer's consent")
        case false?:
            return .notAnswered("the user did not consent to Apple being told how they used their purchases (as the app reported)")
        case true?:
            break
        }
        guard let figures = ConsumptionFigures.figures(for: notification, state: state), let transaction = state.transactions[figures.transactionId] else {
            return .notAnswered("the request names a transaction (\(notification.transactionId ?? "none")) this user's stream does not hold")
        }
        guard !transaction.isFamilyShared else {
            return .notAnswered("a family-shared transaction: Apple takes no consumption information about one")
        }
        guard hasKey else {
            return .notAnswered("the app has no App Store Server API key to answer with (`ledger apps appstore-key`)")
        }
        let deadline = notification.signedDate + window.inSeconds
        guard now < deadline else {
            return .notAnswered("Apple's window for an answer closed at \(deadline.formatted(.iso8601)) before the ledger could answer")
        }
        return .send(transactionId: figures.transactionId, environment: figures.environment, information: ConsumptionInformation(
            deliveryStatus: figures.deliveryStatus, sampleContentProvided: settings.sampleContentProvided,
            consumptionPercentage: figures.consumptionPercentage,
            refundPreference: preference(settings.refundPreference, percentage: figures.consumptionPercentage, type: transaction.productType)
        ))
    }

    /// The app's refund preference as Apple takes it. Apple wants a share strictly between none
    /// and all with `GRANT_PRORATED` (except for auto-renewables, whose share it works out
    /// itself): prorated on nothing used is a full refund, prorated on everything used is none,
    /// and without a share the ledger knows (a non-consumable, a period) no preference is sent.
    static func preference(_ preference: String?, percentage: Int?, type: ProductType) -> String? {
        guard preference == "GRANT_PRORATED", type != .autoRenewable else { return preference }
        switch percentage {
        case nil: return nil
        case 0?: return "GRANT_FULL"
        case 100_000?: return "DECLINE"
        default: return preference
        }
    }

    /// One pass: every request of the window with no answer recorded is answered, or left with
    /// why not. Never throws: what went wrong is logged, and the next pass tries again.
    @discardableResult
    public func sweep(now: Date = Date()) async -> Pass {
        var pass = Pass()
        let notices: [ConsumptionRequestNotice]
        do {
            // A request recovered late from Apple's history is recorded after it was signed: the
            // window is Apple's, from the signing, so one recorded past it is looked at and let be.
            notices = try await inbox.unansweredConsumptionRequests(recordedAfter: now - configuration.window.inSeconds - 3_600,
                                                                    limit: configuration.batch)
        } catch {
            logger.warning("consumption requests could not be read; tried again next pass", metadata: ["ledger.error": "\(error)"])
            return pass
        }
        var settings: [String: (ConsumptionAnswerSettings, ServerAPIKey?)] = [:]
        var heldBack: Set<String> = []
        for notice in notices where !heldBack.contains(notice.app) {
            do {
                if settings[notice.app] == nil {
                    settings[notice.app] = (try await directory.consumptionAnswerSettings(of: notice.app), try await directory.serverAPIKey(of: notice.app))
                }
                let (appSettings, key) = settings[notice.app]!
                switch try await answer(notice, settings: appSettings, key: key, now: now) {
                case .accepted: pass.accepted += 1
                case .refused: pass.refused += 1
                case .notAnswered: pass.notAnswered += 1
                }
            } catch TransactionHistoryError.rateLimited(_, let reason) {
                pass.failed += 1
                heldBack.insert(notice.app)
                logger.notice("Apple asked to slow down; the app's refund questions wait for the next pass", metadata: [
                    "ledger.app": "\(notice.app)", "ledger.reason": "\(reason)",
                ])
            } catch {
                pass.failed += 1
                logger.warning("a refund question could not be answered now; tried again next pass while Apple takes it", metadata: [
                    "ledger.app": "\(notice.app)", "ledger.user": "\(notice.user)", "ledger.notification": "\(notice.notification.notificationUUID)",
                    "ledger.error": "\(error)",
                ])
            }
        }
        if pass != Pass() {
            for (outcome, count) in [("accepted", pass.accepted), ("refused", pass.refused), ("failed", pass.failed)] where count > 0 {
                Counter(label: "ledger_consumption_answers_total", dimensions: [("outcome", outcome)]).increment(by: count)
            }
        }
        return pass
    }

    enum Answered { case accepted, refused, notAnswered }

    private func answer(_ notice: ConsumptionRequestNotice, settings: ConsumptionAnswerSettings, key: ServerAPIKey?, now: Date) async throws -> Answered {
        let state = try await handler.reader.state(app: notice.app, user: notice.user)
        guard let notification = state.facts.notifications.first(where: { $0.uuid == notice.notification.notificationUUID }) else {
            return .notAnswered
        }
        guard case .send(let transactionId, let environment, let information) = Self.plan(
            for: notification, state: state, settings: settings, hasKey: key != nil && server != nil, now: now, window: configuration.window
        ), let key, let server else { return .notAnswered }
        var accepted = true
        var detail: String?
        do {
            try await server.sendConsumption(app: notice.app, environment: environment, key: key, transactionId: transactionId, information: information)
        } catch TransactionHistoryError.refused(let reason) {
            accepted = false
            detail = reason
        } catch TransactionHistoryError.transactionNotFound {
            accepted = false
            detail = "Apple knows no transaction \(transactionId) in the \(environment.rawValue) environment (404)"
        }
        let sent = ConsumptionInformationSent(
            notificationUUID: notification.uuid, transactionId: transactionId, deliveryStatus: information.deliveryStatus,
            sampleContentProvided: information.sampleContentProvided, consumptionPercentage: information.consumptionPercentage,
            refundPreference: information.refundPreference, accepted: accepted, detail: detail
        )
        _ = try await handler.execute(app: notice.app, user: notice.user, metadata: ["source": "consumption answer"]) { state, _ in
            (try UserDecisions.recordConsumptionAnswer(sent, app: notice.app, environment: environment, on: state), ())
        }
        logger.notice(accepted ? "a refund question answered; Apple took the answer" : "a refund question answered; Apple refused the answer", metadata: [
            "ledger.app": "\(notice.app)", "ledger.user": "\(notice.user)", "ledger.transaction": "\(transactionId)",
            "ledger.delivery_status": "\(information.deliveryStatus)",
            "ledger.consumption_percentage": "\(information.consumptionPercentage.map(String.init) ?? "none")",
            "ledger.detail": "\(detail ?? "")",
        ])
        return accepted ? .accepted : .refused
    }
}
