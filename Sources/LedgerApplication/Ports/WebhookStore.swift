/// Webhook endpoints, their queues of deliveries and every attempt: administered by
/// `ManageWebhooks`, worked through by `WebhookDelivery`.
public protocol WebhookStore: Sendable {
    // MARK: Administration

    /// Adds an endpoint of `app` that starts after `fromPosition` (nil: after the changes written so
    /// far), its secret kept sealed. Throws `SecretError.noKey` when secrets cannot be sealed.
    func addEndpoint(app: String, url: String, types: [String]?, fromPosition: Int64?, secret: WebhookSecret) async throws -> WebhookEndpoint

    /// The app's endpoints that are not removed, oldest first.
    func endpoints(app: String) async throws -> [WebhookEndpoint]

    /// The endpoint, removed or not; nil when there is none.
    func endpoint(id: String) async throws -> WebhookEndpoint?

    /// Removes the endpoint (its deliveries stop; its history stays); nil when there is none.
    func removeEndpoint(id: String) async throws -> WebhookEndpoint?

    /// The app's latest deliveries (of one endpoint, or all), newest last, each with its attempts;
    /// `failedOnly`: those parked or whose last attempt failed.
    func deliveries(app: String, endpointID: String?, failedOnly: Bool, limit: Int) async throws -> [WebhookDeliveryRecord]

    /// Makes the endpoint's delivery of `change` pending again, due now; false when it has none.
    func resend(endpointID: String, change: WebhookChangeID) async throws -> Bool

    /// Makes every delivery of the endpoint after `position` pending again, due now, queuing the
    /// changes it never queued (from before its start) too; returns how many.
    func resend(endpointID: String, after position: Int64) async throws -> Int

    // MARK: Delivery

    /// The ids of the endpoints not removed, of every app.
    func activeEndpointIDs() async throws -> [String]

    /// The endpoint's URL and opened secret; nil once it is removed.
    func target(endpointID: String) async throws -> WebhookTarget?

    /// Queues for the endpoint the changes written after its position (at most `limit` log
    /// positions), moving its position in the same transaction; returns how many were queued.
    func queue(endpointID: String, limit: Int) async throws -> Int

    /// The endpoint's deliveries due now that are the earliest pending of their user, in log order.
    func due(endpointID: String, limit: Int) async throws -> [PendingWebhook]

    /// Records an attempt at `delivery` and what becomes of it, in one statement.
    func record(_ answer: WebhookAnswer, of delivery: PendingWebhook, outcome: WebhookAttemptOutcome) async throws
}
