import AppStore
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import LedgerApplication
import LedgerDomain
import Logging

/// The routes of HTTP API v1: each parses and checks its request, authorizes the key, calls one
/// use case of `LedgerServices` and maps its answer.
public struct LedgerAPI: Sendable {
    public struct Configuration: Sendable {
        /// How long a read with `minPosition` waits for the projections before answering 503.
        public var readWaitTimeout: Duration
        /// How long a request body may take to arrive, all of it; past it, 408 and nothing recorded.
        public var bodyReadTimeout: Duration
        /// The same for the keyless notifications webhook, shorter: Apple sends its body at once,
        /// and a stranger's half-sent body must not hold a slot for long.
        public var webhookBodyReadTimeout: Duration
        /// Checks StoreKit 2 transactions and App Store notifications: Apple's root only, unless
        /// an operator trusts a test root too (`--trust-simulator-root`).
        public var signedPayloads: SignedPayloadVerifier
        /// Called once a command sent with an `Idempotency-Key` has appended, before its answer is
        /// kept or sent: where a fault test stops the process (`ledger-bench serve --kill-at`).
        public var afterCommandAppend: (@Sendable () -> Void)?

        public init(
            readWaitTimeout: Duration = .seconds(5), bodyReadTimeout: Duration = .seconds(30), webhookBodyReadTimeout: Duration = .seconds(5),
            signedPayloads: SignedPayloadVerifier = SignedPayloadVerifier(), afterCommandAppend: (@Sendable () -> Void)? = nil
        ) {
            self.readWaitTimeout = readWaitTimeout
            self.bodyReadTimeout = bodyReadTimeout
            self.webhookBodyReadTimeout = webhookBodyReadTimeout
            self.signedPayloads = signedPayloads
            self.afterCommandAppend = afterCommandAppend
        }
    }

    let configuration: Configuration
    let services: LedgerServices
    let access: APIAccess
    /// Refused notifications, logged at most so often.
    let refusals = RefusalLog()

    public init(services: LedgerServices, configuration: Configuration = .init()) {
        self.configuration = configuration
        self.services = services
        self.access = APIAccess(directory: services.directory)
    }

    func addRoutes(to router: Router<LedgerRequestContext>) {
        let apps = router.group("v1/apps/:bundleId")
        apps.put("products/:productId") { try await defineProduct($0, $1) }
        apps.get("products") { try await products($0, $1) }
        apps.post("receipts") { try await ingestReceipt($0, $1) }
        apps.post("transactions") { try await ingestSignedTransaction($0, $1) }
        apps.post("notifications") { try await receiveNotification($0, $1) }
        apps.post("transactions/:transactionId/finish") { try await finish($0, $1) }
        apps.post("failures") { try await recordFailure($0, $1) }
        apps.post("transactions/:transactionId/revoke") { try await revoke($0, $1) }
        apps.post("users/:userId/consumptions") { try await consume($0, $1) }
        apps.post("users/:userId/devices/:deviceId/restore") { try await restoreToDevice($0, $1) }
        apps.put("users/:userId/app-account-tokens/:token") { try await bindAppAccountToken($0, $1) }
        apps.post("users/:userId/app-account-tokens") { try await makeAppAccountToken($0, $1) }
        apps.get("users/:userId/app-account-tokens") { try await appAccountTokens($0, $1) }
        apps.get("notifications/unclaimed") { try await unclaimedNotifications($0, $1) }
        apps.get("users/:userId/entitlements") { try await entitlements($0, $1) }
        apps.get("users/:userId/balances") { try await balances($0, $1) }
        apps.get("users/:userId/subscriptions") { try await subscriptions($0, $1) }
        apps.get("users/:userId/history") { try await history($0, $1) }
        apps.get("users/:userId/consumption-requests") { try await consumptionRequests($0, $1) }
        apps.put("users/:userId/consumption-consent") { try await recordConsumptionConsent($0, $1) }
        apps.get("orders/:orderId") { try await order($0, $1) }
        apps.get("changes") { try await changes($0, $1) }
        apps.post("webhooks") { try await addWebhook($0, $1) }
        apps.get("webhooks") { try await webhooks($0, $1) }
        apps.delete("webhooks/:id") { try await removeWebhook($0, $1) }
        apps.get("webhooks/:id/deliveries") { try await webhookDeliveries($0, $1) }
        apps.post("webhooks/:id/resend") { try await resendWebhook($0, $1) }
        router.get("v1/key") { try await keyInfo($0, $1) }
        let audit = router.group("v1/audit")
        audit.get("events") { try await auditEvents($0, $1) }
        audit.get("summary") { try await auditSummary($0, $1) }
        audit.get("unclassified") { try await auditUnclassified($0, $1) }
        audit.get("restores") { try await auditRestores($0, $1) }
        audit.get("reconciliation") { try await auditReconciliation($0, $1) }
        audit.get("periods") { try await auditPeriods($0, $1) }
        audit.get("periods/:period") { try await auditPeriod($0, $1) }
        audit.post("periods/:period/close") { try await closePeriod($0, $1) }
        audit.post("periods/:period/reopen") { try await reopenPeriod($0, $1) }
        audit.get("adjustments") { try await auditAdjustments($0, $1) }
        audit.get("metrics") { try await auditMetrics($0, $1) }
    }
}

// MARK: - Shared pieces of the handlers

/// An answer before it becomes a response, so that idempotent commands can store and replay it.
struct Reply: Sendable {
    var status: HTTPResponse.Status
    var body: Data
    var headers: HTTPFields = [:]

    init(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws {
        self.status = status
        self.body = try APIJSON.makeEncoder().encode(value)
    }

    init(status: HTTPResponse.Status, body: Data) {
        self.status = status
        self.body = body
    }

    var response: Response {
        APIJSON.response(data: body, status: status, headers: headers)
    }
}

extension LedgerAPI {
    /// The app of an app route, once the caller's key is shown to belong to it and to hold `scope`;
    /// the context comes back with the key in it (and in its logger's metadata).
    func authorizedApp(_ request: Request, _ context: LedgerRequestContext, scope: APIScope) async throws -> (String, LedgerRequestContext) {
        var context = context
        let app = try Self.parameter("bundleId", context)
        _ = try await access.authorize(request, &context, scope: scope, app: app)
        return (app, context)
    }

    /// A path parameter, percent-decoded and checked: 1 to 255 characters, no control characters.
    static func parameter(_ name: String, _ context: LedgerRequestContext) throws -> String {
        guard let raw = context.parameters.get(name) else { throw APIError.invalidRequest("the path needs \(name)", field: name) }
        let value = raw.removingPercentEncoding ?? raw
        try validateIdentifier(value, field: name)
        return value
    }

    static func validateIdentifier(_ value: String, field: String) throws {
        guard !value.isEmpty, value.utf8.count <= APILimits.identifierCharacters else {
            throw APIError.invalidRequest("\(field) must have 1 to \(APILimits.identifierCharacters) characters", field: field)
        }
        guard !value.unicodeScalars.contains(where: \.isControlCharacter) else {
            throw APIError.invalidRequest("\(field) must not contain control characters", field: field)
        }
        // A user's id names their stream, whose ids are printable without spaces.
        if field == "userId", value.unicodeScalars.contains(where: { $0.properties.isWhitespace }) {
            throw APIError.invalidRequest("userId must not contain spaces", field: field)
        }
    }

    /// Free text (a receipt, a reason, an error code): anything but U+0000, which the log cannot store.
    static func validateText(_ value: String, field: String) throws {
        if value.unicodeScalars.contains("\u{0}") {
            throw APIError.invalidRequest(LedgerInputError.nulCharacter(field: field).message, field: field)
        }
    }

    /// A whole-number query parameter, when given.
    static func integerQuery(_ name: String, _ request: Request, range: ClosedRange<Int64>) throws -> Int64? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        guard let value = Int64(text), range.contains(value) else {
            throw APIError.invalidRequest("\(name) must be a whole number from \(range.lowerBound) to \(range.upperBound) (got '\(text)')", field: name)
        }
        return value
    }

    /// An ISO 8601 time query parameter, when given.
    static func timeQuery(_ name: String, _ request: Request) throws -> Date? {
        guard let text = request.uri.queryParameters.get(name) else { return nil }
        guard let date = LedgerJSON.parseTimestamp(text) else {
            throw APIError.invalidRequest("\(name) '\(text)' is not an ISO 8601 UTC time such as 2026-01-31T12:00:00Z", field: name)
        }
        return date
    }

    /// Metadata stored with every event a request appends: where it came from.
    static func metadata(_ context: LedgerRequestContext) -> [String: String] {
        var metadata = ["requestId": context.requestID, "source": "http"]
        if let key = context.apiKey { metadata["apiKeyId"] = key.keyId }
        return metadata
    }

    /// Runs a client command under its `Idempotency-Key`, when the request has one: the same key and
    /// body get the first answer again; another body under the key is refused (422).
    ///
    /// The key (scoped to the app) is the deduplication key of the command's first event, passed to
    /// `run`, so the append itself is the claim: a retry after a crash between the append and the
    /// answer, or running alongside the first, is answered from the log and appends nothing. The
    /// kept answers only make replies byte-identical and refusals (4xx) stick; answers a retry
    /// could change (5xx) are not kept.
    func idempotent(
        _ request: Request, _ context: LedgerRequestContext, app: String, body: Data,
        _ run: (DeduplicationKey?) async throws -> Reply
    ) async throws -> Response {
        guard let key = request.headers[.idempotencyKey] else { return try await run(nil).response }
        guard (1...255).contains(key.utf8.count), key.unicodeScalars.allSatisfy({ $0.value >= 0x21 && $0.value < 0x7F }) else {
            throw APIError.invalidRequest("Idempotency-Key must be 1 to 255 printable ASCII characters, such as a UUID", field: "Idempotency-Key")
        }
        var hasher = SHA256()
        hasher.update(data: Data("\(request.method) \(request.uri.path)\n".utf8))
        hasher.update(data: Self.canonicalJSON(body))
        let commandKey = try DeduplicationKey.command(app: app, idempotencyKey: key) { key in
            SHA256.hash(data: Data(key.utf8)).map { String(format: "%02x", $0) }.joined()
        }
        switch try await services.idempotency.claim(app: app, key: key, requestHash: Data(hasher.finalize())) {
        case .mismatch:
            throw APIError.unprocessable("idempotency_key_reused", "this Idempotency-Key was used with another request; use a new key for a new command")
        case .replay(let status, let body):
            var reply = Reply(status: HTTPResponse.Status(code: status), body: body)
            reply.headers[.idempotentReplayed] = "true"
            return reply.response
        case .claimed:
            do {
                let reply = try await run(commandKey)
                configuration.afterCommandAppend?()
                try await services.idempotency.complete(app: app, key: key, status: Int(reply.status.code), body: reply.body)
                return reply.response
            } catch {
                // A refusal is an answer too: a retry under the key gets it again. Anything a retry
                // could change (5xx, unexpected) releases the key.
                guard let refusal = APIError(mapping: error), (400..<500).contains(refusal.status.code) else {
                    try? await services.idempotency.release(app: app, key: key)
                    throw error
                }
                let body = try APIJSON.makeEncoder().encode(refusal.body(requestID: context.requestID))
                try await services.idempotency.complete(app: app, key: key, status: Int(refusal.status.code), body: body)
                throw refusal
            }
        }
    }

    /// The body with its keys sorted, so that a retry serialised in another key order is the same request.
    static func canonicalJSON(_ body: Data) -> Data {
        guard !body.isEmpty, let object = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]),
              let canonical = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
        else { return body }
        return canonical
    }
}

extension HTTPField.Name {
    static let idempotentReplayed = Self("Idempotent-Replayed")!
}
