import Foundation
import Hummingbird
import LedgerApplication

/// The app's webhook endpoints, for its admin key: add (the secret in the answer, once), list,
/// remove, the deliveries and their attempts, and sending deliveries again (`ManageWebhooks`).
extension LedgerAPI {
    func webhooksService() throws -> ManageWebhooks {
        guard let webhooks = services.webhooks else {
            throw APIError.unavailable("webhooks_unavailable", "this server keeps no webhook endpoints", retryable: false)
        }
        return webhooks
    }

    /// An endpoint as the API shows it; `secret` only in the answer to its creation.
    struct WebhookEndpointBody: Encodable {
        let id: String
        let url: String
        let types: [String]?
        let position: Int64
        let createdAt: Date
        let removedAt: Date?
        let secret: String?

        init(_ endpoint: WebhookEndpoint, secret: WebhookSecret? = nil) {
            id = endpoint.id
            url = endpoint.url
            types = endpoint.types
            position = endpoint.position
            createdAt = endpoint.createdAt
            removedAt = endpoint.removedAt
            self.secret = secret?.text
        }
    }

    /// `POST /v1/apps/{bundleId}/webhooks` `{url, types?, fromPosition?}`: 201 with the endpoint and its secret.
    func addWebhook(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        struct Body: Decodable { let url: String; let types: [String]?; let fromPosition: Int64? }
        let (body, _) = try await APIJSON.decode(Body.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        let created: CreatedWebhookEndpoint
        do {
            created = try await webhooksService().add(app: app, url: body.url, types: body.types, fromPosition: body.fromPosition)
        } catch let error as SecretError where error.code == .noKey {
            throw APIError.conflict("no_secret_key", "this server has no secret key to seal the endpoint's secret with; its operator sets LEDGER_SECRET_KEY or LEDGER_SECRET_KEY_FILE")
        }
        return try APIJSON.response(WebhookEndpointBody(created.endpoint, secret: created.secret), status: .created)
    }

    /// `GET /v1/apps/{bundleId}/webhooks`: the app's endpoints that are not removed.
    func webhooks(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        struct Answer: Encodable { let endpoints: [WebhookEndpointBody] }
        return try APIJSON.response(Answer(endpoints: try await webhooksService().list(app: app).map { WebhookEndpointBody($0) }))
    }

    /// `DELETE /v1/apps/{bundleId}/webhooks/{id}`: nothing more is sent to it.
    func removeWebhook(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        let id = try Self.parameter("id", context)
        return try APIJSON.response(WebhookEndpointBody(try await webhooksService().remove(id: id, app: app)))
    }

    /// `GET /v1/apps/{bundleId}/webhooks/{id}/deliveries?failed=true&limit=50`: the latest
    /// deliveries, in log order, each with every attempt and its answer.
    func webhookDeliveries(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        let id = try Self.parameter("id", context)
        let query = request.uri.queryParameters
        var failed = false
        if let text = query.get("failed") {
            guard let value = Bool(text) else { throw APIError.invalidRequest("failed is true or false, not '\(text.prefix(20))'", field: "failed") }
            failed = value
        }
        var limit = 50
        if let text = query.get("limit") {
            guard let value = Int(text), (1...ManageWebhooks.maximumLimit).contains(value) else {
                throw APIError.invalidRequest("limit is 1 to \(ManageWebhooks.maximumLimit)", field: "limit")
            }
            limit = value
        }
        struct Answer: Encodable { let deliveries: [WebhookDeliveryRecord] }
        return try APIJSON.response(Answer(deliveries: try await webhooksService().deliveries(app: app, endpointID: id, failedOnly: failed, limit: limit)))
    }

    /// `POST /v1/apps/{bundleId}/webhooks/{id}/resend` `{changeId}` or `{after}`: pending again, due now.
    func resendWebhook(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        let id = try Self.parameter("id", context)
        struct Body: Decodable { let changeId: String?; let after: Int64? }
        let (body, _) = try await APIJSON.decode(Body.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        struct Answer: Encodable { let resent: Int }
        switch (body.changeId, body.after) {
        case (let changeID?, nil):
            try await webhooksService().resend(endpointID: id, changeID: changeID, app: app)
            return try APIJSON.response(Answer(resent: 1))
        case (nil, let after?):
            return try APIJSON.response(Answer(resent: try await webhooksService().resend(endpointID: id, after: after, app: app)))
        default:
            throw APIError.invalidRequest("name either changeId (one change, chg_<position>_<seq>) or after (every change after a log position)")
        }
    }
}
