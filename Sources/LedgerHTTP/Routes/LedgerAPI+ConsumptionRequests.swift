import Hummingbird
import LedgerApplication

extension LedgerAPI {
    /// `GET /v1/apps/{bundleId}/users/{userId}/consumption-requests`: the CONSUMPTION_REQUEST
    /// notifications Apple sent about the user's purchases, newest first, each with the figures
    /// Apple's consumption information asks for (`ConsumptionRequests`). The app answers Apple
    /// with them (Send Consumption Information); the ledger sends nothing itself.
    func consumptionRequests(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        return try APIJSON.response(try await services.consumptionRequests(app: app, user: user))
    }
}
