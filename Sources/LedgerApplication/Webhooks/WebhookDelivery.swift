import Foundation
import Logging

/// Sends every app's changes to its webhook endpoints, signed, in log order per user, at least once.
///
/// Run by the server that leads the projections (`ProjectionLeadership`'s companions), so one
/// server delivers at a time. Each endpoint is worked by a task of its own: it queues the changes
/// written since its position (moving the position in the same transaction, so a restart or a new
/// leader goes on where it stopped), then sends what is due, up to `concurrency` at once, and
/// records every attempt. A slow or dead endpoint holds up nobody but itself, and ingest never
/// waits for any of this: the changes are already in the database.
///
/// Per-user order: a change is sent only once every earlier change of its user to the same
/// endpoint is delivered or parked. A parked change no longer holds back the user's later ones
/// (the receiver sees a gap, and the deliveries listing shows it); resending it sends it after them.
public struct WebhookDelivery: Sendable {
    public struct Configuration: Sendable {
        /// When a failed delivery is tried again, and when it is parked.
        public var schedule: WebhookRetrySchedule
        /// How long an endpoint with nothing due waits before looking again.
        public var pollInterval: Duration
        /// How often the list of endpoints is read again (new and removed endpoints).
        public var refreshInterval: Duration
        /// Deliveries of one endpoint in flight at once.
        public var concurrency: Int
        /// Deliveries due taken per pass (each the earliest pending of its user), sent `concurrency`
        /// at a time: a slow answer holds one slot, not the pass.
        public var passSize: Int
        /// Log positions queued per endpoint per pass.
        public var queueBatch: Int

        public init(
            schedule: WebhookRetrySchedule = .standard, pollInterval: Duration = .milliseconds(500), refreshInterval: Duration = .seconds(1),
            concurrency: Int = 16, passSize: Int = 256, queueBatch: Int = 1_000
        ) {
            self.schedule = schedule
            self.pollInterval = pollInterval
            self.refreshInterval = refreshInterval
            self.concurrency = concurrency
            self.passSize = passSize
            self.queueBatch = queueBatch
        }
    }

    let store: any WebhookStore
    let sender: any WebhookSender
    public let configuration: Configuration
    let logger: Logger

    public init(store: any WebhookStore, sender: any WebhookSender, configuration: Configuration = .init(), logger: Logger) {
        self.store = store
        self.sender = sender
        self.configuration = configuration
        self.logger = logger
    }

    /// Delivers until cancelled: a task per active endpoint, started as endpoints appear and
    /// ended when they are removed.
    public func run() async {
        await withTaskGroup(of: String?.self) { group in
            var running: Set<String> = []
            while !Task.isCancelled {
                do {
                    for id in try await store.activeEndpointIDs() where !running.contains(id) {
                        running.insert(id)
                        group.addTask { await serve(endpointID: id); return id }
                    }
                } catch {
                    logger.warning("webhook endpoints could not be read; read again shortly", metadata: ["ledger.error": "\(error)"])
                }
                group.addTask { [refresh = configuration.refreshInterval] in
                    try? await Task.sleep(for: refresh)
                    return nil
                }
                // Until the next refresh, forget the endpoints whose task ended (removed).
                while let ended = await group.next() {
                    guard let ended else { break }
                    running.remove(ended)
                }
            }
            group.cancelAll()
        }
    }

    /// Works one endpoint until it is removed or the task is cancelled.
    func serve(endpointID: String) async {
        var target: WebhookTarget?
        while !Task.isCancelled {
            do {
                // Read again every pass, so that a removal stops the deliveries at once.
                guard let current = try await store.target(endpointID: endpointID) else { return }
                target = current
                _ = try await store.queue(endpointID: endpointID, limit: configuration.queueBatch)
                if try await deliverDue(to: current) > 0 { continue }
            } catch is CancellationError {
                return
            } catch {
                logger.warning("webhook deliveries of an endpoint failed; tried again shortly", metadata: [
                    "ledger.webhook_endpoint": "\(endpointID)", "ledger.app": "\(target?.app ?? "?")", "ledger.error": "\(error)",
                ])
            }
            try? await Task.sleep(for: configuration.pollInterval)
        }
    }

    /// Sends the deliveries due now (at most `passSize`, each the earliest pending of its user),
    /// `concurrency` at a time, and records each answer as it comes; returns how many were sent.
    func deliverDue(to target: WebhookTarget) async throws -> Int {
        let due = try await store.due(endpointID: target.endpointId, limit: configuration.passSize)
        guard !due.isEmpty else { return 0 }
        let signer = WebhookSigner(secret: target.secret)
        try await withThrowingTaskGroup(of: Void.self) { group in
            var waiting = due[...]
            var inFlight = 0
            while let delivery = waiting.popFirst() {
                if inFlight == configuration.concurrency {
                    try await group.next()
                    inFlight -= 1
                }
                inFlight += 1
                group.addTask {
                    let timestamp = Int64(Date().timeIntervalSince1970)
                    let id = delivery.change.description
                    let answer = await sender.send(WebhookRequest(
                        url: target.url, headers: signer.headers(id: id, timestamp: timestamp, body: delivery.body), body: delivery.body
                    ))
                    let outcome = outcome(of: answer, delivery: delivery)
                    try await store.record(answer, of: delivery, outcome: outcome)
                    log(answer, outcome, delivery: delivery, target: target)
                }
            }
            try await group.waitForAll()
        }
        return due.count
    }

    /// Delivered on a 2xx; otherwise tried again by the schedule, or parked once it ends.
    func outcome(of answer: WebhookAnswer, delivery: PendingWebhook) -> WebhookAttemptOutcome {
        if answer.delivered { return .delivered }
        guard let delay = configuration.schedule.delay(afterFailure: delivery.attemptInRound) else { return .parked }
        return .retry(after: delay)
    }

    private func log(_ answer: WebhookAnswer, _ outcome: WebhookAttemptOutcome, delivery: PendingWebhook, target: WebhookTarget) {
        let metadata: Logger.Metadata = [
            "ledger.webhook_endpoint": "\(target.endpointId)", "ledger.app": "\(target.app)", "ledger.change": "\(delivery.change)",
            "ledger.attempt": "\(delivery.attempts + 1)", "ledger.status_code": "\(answer.statusCode.map(String.init) ?? "none")",
            "ledger.error": "\(answer.error ?? "")",
        ]
        switch outcome {
        case .delivered: logger.debug("webhook delivered", metadata: metadata)
        case .retry: logger.debug("webhook attempt failed; tried again later", metadata: metadata)
        case .parked: logger.warning("webhook delivery parked: its retries ended; `ledger webhooks resend` sends it again", metadata: metadata)
        }
    }
}
