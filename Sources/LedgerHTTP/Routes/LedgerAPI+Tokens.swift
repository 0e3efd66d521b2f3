import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain

/// `appAccountToken`s, bound by the app's server: the one way a notification whose transaction
/// no user holds yet finds its user by token. A client chooses its own token (StoreKit's
/// `.appAccountToken(_:)`), so the ledger never takes a token's user from whoever posts first
/// with it.
extension LedgerAPI {
    struct TokenAnswer: Encodable {
        let userId: String
        let appAccountToken: String
        /// Where the binding is in the log.
        let position: Int64
        /// False when the token was bound to this user already.
        let bound: Bool
    }

    /// `PUT …/users/{userId}/app-account-tokens/{token}`: binds the app's own token to the user
    /// (409 `token_bound_to_another_user` when another user has it).
    func bindAppAccountToken(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let user = try Self.parameter("userId", context)
        let token = try Self.parameter("token", context)
        guard AppAccountToken.normalized(token) != nil else {
            throw APIError.invalidRequest("token '\(token.prefix(80))' is not a UUID, which StoreKit requires of an appAccountToken", field: "token")
        }
        let result = try await services.commands.bindToken(token, user: user, app: app, metadata: Self.metadata(context))
        return try APIJSON.response(TokenAnswer(userId: user, appAccountToken: result.token, position: result.position, bound: result.bound),
                                    status: result.bound ? .created : .ok)
    }

    /// `POST …/users/{userId}/app-account-tokens`: a new token the ledger makes and binds to the
    /// user, for the app to give StoreKit with the user's purchases.
    func makeAppAccountToken(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let user = try Self.parameter("userId", context)
        let raw = try await APIJSON.body(of: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        return try await idempotent(request, context, app: app, body: raw) { _ in
            let result = try await services.commands.bindToken(nil, user: user, app: app, metadata: Self.metadata(context))
            return try Reply(TokenAnswer(userId: user, appAccountToken: result.token, position: result.position, bound: result.bound), status: .created)
        }
    }

    /// `GET …/users/{userId}/app-account-tokens`: the tokens bound to the user, from their stream.
    func appAccountTokens(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        _ = context
        let state = try await services.reader.state(app: app, user: user)
        guard state.version > 0 else { throw APIError.unknownUser(user) }
        struct Answer: Encodable { let userId: String; let appAccountTokens: [String] }
        return try APIJSON.response(Answer(userId: user, appAccountTokens: state.boundTokens.sorted()))
    }

    /// `GET …/notifications/unclaimed?state=waiting|expired&limit`: the app's notifications no
    /// user took yet (waiting), or that waited past their time (expired), for an operator.
    func unclaimedNotifications(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .admin)
        let stateText = request.uri.queryParameters.get("state") ?? "waiting"
        guard let state = UnclaimedNotification.State(rawValue: stateText) else {
            throw APIError.invalidRequest("state must be waiting or expired (got '\(stateText.prefix(40))')", field: "state")
        }
        let limit = try Self.integerQuery("limit", request, range: 1...Int64(APILimits.maximumPageSize)) ?? Int64(APILimits.defaultPageSize)
        let found = try await services.waitingNotifications.list(app: app, state: state, limit: Int(limit))
        struct Item: Encodable {
            let notificationUUID: String
            let notificationType: String
            @NullWhenAbsent var subtype: String?
            let environment: String
            @NullWhenAbsent var transactionId: String?
            @NullWhenAbsent var originalTransactionId: String?
            @NullWhenAbsent var appAccountToken: String?
            let position: Int64
            let recordedAt: Date
            @NullWhenAbsent var expiredAt: Date?
        }
        struct Answer: Encodable { let state: String; let notifications: [Item] }
        let items = found.map { item in
            Item(notificationUUID: item.notification.notificationUUID, notificationType: item.notification.notificationType,
                 subtype: item.notification.subtype, environment: item.notification.environment.rawValue,
                 transactionId: item.notification.transaction.flatMap { AppStoreFields($0).transactionId },
                 originalTransactionId: item.notification.originalTransactionId, appAccountToken: item.notification.appAccountToken,
                 position: item.position, recordedAt: item.recordedAt, expiredAt: item.expiredAt)
        }
        return try APIJSON.response(Answer(state: state.rawValue, notifications: items))
    }
}
