import Hummingbird
import LedgerApplication

extension LedgerAPI {
    struct ConsentBody: Codable, Sendable { let consented: Bool }

    /// `GET /v1/apps/{bundleId}/users/{userId}/consumption-requests`: the CONSUMPTION_REQUEST
    /// notifications Apple sent about the user's purchases, newest first, each with the figures
    /// Apple's consumption information asks for and the ledger's answer to Apple: sent (and
    /// Apple's answer), about to be sent, or not sent and why (`ConsumptionRequests`).
    func consumptionRequests(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        return try APIJSON.response(try await services.consumptionRequests(app: app, user: user))
    }

    /// `PUT …/users/{userId}/consumption-consent`: the app reports whether the user consented to
    /// Apple being told how they used their purchases when they ask Apple for a refund (or
    /// withdrew consent). Without it the ledger does not answer Apple's refund questions.
    func recordConsumptionConsent(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let user = try Self.parameter("userId", context)
        let (body, _) = try await APIJSON.decode(ConsentBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        let result = try await services.commands.recordConsumptionConsent(body.consented, user: user, app: app, metadata: Self.metadata(context))
        struct Answer: Encodable { let userId: String; let consented: Bool; let position: Int64; let changed: Bool }
        return try APIJSON.response(Answer(userId: user, consented: body.consented, position: result.position, changed: result.changed))
    }

    /// `GET …/orders/{orderId}`: the order id of a customer's e-mail receipt, looked up with
    /// Apple, each transaction with the user the ledger holds it for (null for none).
    func order(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let orderId = try Self.parameter("orderId", context)
        return try APIJSON.response(try await services.appStore.order(app: app, orderId: orderId))
    }
}
