import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerProjections

extension LedgerAPI {
    /// The projections each read route answers from.
    enum ReadModel {
        static let entitlements: [ProjectionName] = [.ownership, .subscriptionPeriods, .consumableBalances]
        static let balances: [ProjectionName] = [.consumableBalances]
        static let subscriptions: [ProjectionName] = [.subscriptionPeriods]
    }

    /// Authorizes a user read and waits for `minPosition` when asked. Returns the app, the user
    /// and the position the projections have reached; 503 `projections_behind` when one of them
    /// has no live version.
    private func prepareRead(
        _ request: Request, _ context: LedgerRequestContext, projections: [ProjectionName]
    ) async throws -> (app: String, user: String, position: Int64) {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        let position: Int64
        if let minimum = try Self.integerQuery("minPosition", request, range: 0...Int64.max) {
            position = try await services.reads.waitForProjections(projections, toReach: minimum, timeout: configuration.readWaitTimeout)
        } else {
            // No live version (a new one still building, or a failed one): 503, never rows that miss the log.
            position = try await services.reads.checkpoint(of: projections)
        }
        return (app, user, position)
    }

    /// `GET …/users/{userId}/entitlements`: what the user may use now (or `at`).
    func entitlements(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let at = try Self.timeQuery("at", request) ?? Date()
        let (app, user, position) = try await prepareRead(request, context, projections: ReadModel.entitlements)
        let rows = try await services.reads.entitlementRows(app: app, user: user, at: position)
        guard rows.userExists || !(rows.owned.isEmpty && rows.periods.isEmpty && rows.balances.isEmpty) else { throw APIError.unknownUser(user) }
        let entitlements = Entitlements(at: at, owned: rows.owned.map(\.owned), periods: rows.periods.map(\.period),
                                        balances: rows.balances.map(\.consumableBalance))
        return APIJSON.response(data: EntitlementsBody(userId: user, position: position, entitlements).json(), status: .ok)
    }

    /// `GET …/users/{userId}/balances`: consumables bought, used and left.
    func balances(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, user, position) = try await prepareRead(request, context, projections: ReadModel.balances)
        struct Balance: Encodable { let productId: String; let purchased, consumed, balance: Int64; let overdrawn: Bool }
        struct Answer: Encodable { let userId: String; let position: Int64; let balances: [Balance] }
        // The user's kept rows when they are true at `position` (see `EntitlementRowCache`).
        let kept = try await services.reads.entitlementRows(app: app, user: user, at: position)
        let rows = kept.balances
        guard kept.userExists || !rows.isEmpty else { throw APIError.unknownUser(user) }
        let balances = rows.map {
            Balance(productId: $0.productId, purchased: $0.purchased, consumed: $0.consumed, balance: $0.balance, overdrawn: $0.overdrawn)
        }
        return try APIJSON.response(Answer(userId: user, position: position, balances: balances))
    }

    /// `GET …/users/{userId}/subscriptions`: every period paid for, per product and group.
    func subscriptions(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let at = try Self.timeQuery("at", request) ?? Date()
        let (app, user, position) = try await prepareRead(request, context, projections: ReadModel.subscriptions)
        struct Period: Encodable {
            let transactionId, originalTransactionId, productId, group, kind: String
            let start, end: Date
            let active: Bool
        }
        struct Answer: Encodable { let userId: String; let at: Date; let position: Int64; let periods: [Period] }
        let kept = try await services.reads.entitlementRows(app: app, user: user, at: position)
        let rows = kept.periods
        guard kept.userExists || !rows.isEmpty else { throw APIError.unknownUser(user) }
        let periods = rows.map {
            Period(transactionId: $0.transactionId, originalTransactionId: $0.originalTransactionId, productId: $0.productId,
                   group: $0.group, kind: $0.kind.rawValue, start: $0.start, end: $0.end, active: $0.period.isActive(at: at))
        }
        return try APIJSON.response(Answer(userId: user, at: at, position: position, periods: periods))
    }

    /// `GET …/users/{userId}/history`: the user's events in order, as recorded (from the log itself).
    func history(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .read)
        let user = try Self.parameter("userId", context)
        let from = try Self.integerQuery("fromVersion", request, range: 1...Int64.max) ?? 1
        let limit = try Self.integerQuery("limit", request, range: 1...Int64(APILimits.maximumPageSize)) ?? Int64(APILimits.defaultPageSize)
        let stream: StreamID
        do { stream = try StreamID.user(app: app, user: user) } catch { throw APIError.invalidRequest(error.message, field: "userId") }
        let events = try await services.store.readStream(stream, fromVersion: from, limit: Int(limit) + 1)
        if events.isEmpty, from == 1 { throw APIError.unknownUser(user) }
        struct Event: Encodable { let position: Int64; let version: Int64; let type: String; let recordedAt: Date; let data: JSONValue }
        struct Answer: Encodable { let userId: String; let events: [Event]; let nextFromVersion: Int64? }
        let page = events.prefix(Int(limit))
        return try APIJSON.response(Answer(
            userId: user,
            events: try page.map {
                Event(position: $0.position, version: $0.streamVersion, type: $0.type, recordedAt: $0.recordedAt,
                      data: try JSONValue(json: $0.data))
            },
            nextFromVersion: events.count > Int(limit) ? page.last.map { $0.streamVersion + 1 } : nil
        ))
    }
}
