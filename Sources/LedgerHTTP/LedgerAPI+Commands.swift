import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerStore

extension LedgerAPI {
    struct FinishBody: Codable, Sendable { let deviceId: String }
    struct FailureBody: Codable, Sendable { let userId: String; let deviceId: String; let productId: String; let errorCode: String; let cancelled: Bool }
    struct RevokeBody: Codable, Sendable { let reason: String; let revokedAt: Date? }
    struct ConsumptionBody: Codable, Sendable { let productId: String; let quantity: Int; let deviceId: String }

    /// `POST …/transactions/{transactionId}/finish`: the app finished the transaction on a device.
    func finish(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let transactionID = try Self.parameter("transactionId", context)
        let (body, raw) = try await APIJSON.decode(FinishBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateIdentifier(body.deviceId, field: "deviceId")
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let user = try await owner(of: transactionID, app: app)
            let outcome = try await execute(app: app, user: user, context, commandKey: commandKey) { state, _ in
                (try UserDecisions.finish(transactionId: transactionID, deviceId: body.deviceId, on: state), ())
            }
            struct Answer: Encodable { let position: Int64; let transactionId: String; let duplicate: Bool }
            // Finished before: the answer names where the first finish is.
            var position = outcome.append?.position ?? outcome.state.finishPositions[transactionID] ?? 0
            if position == 0 { position = try await self.position(of: outcome, app: app, user: user) }
            return try Reply(Answer(position: position, transactionId: transactionID, duplicate: outcome.append == nil))
        }
    }

    /// `POST …/failures`: a purchase the App Store did not complete.
    func recordFailure(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let (body, raw) = try await APIJSON.decode(FailureBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        for (field, value) in [("userId", body.userId), ("deviceId", body.deviceId), ("productId", body.productId)] {
            try Self.validateIdentifier(value, field: field)
        }
        try Self.validateText(body.errorCode, field: "errorCode")
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let outcome = try await execute(app: app, user: body.userId, context, commandKey: commandKey) { state, _ in
                (try UserDecisions.recordFailure(productId: body.productId, deviceId: body.deviceId, errorCode: body.errorCode,
                                                  cancelled: body.cancelled, on: state), ())
            }
            struct Answer: Encodable { let position: Int64 }
            return try Reply(Answer(position: outcome.append?.position ?? 0), status: .created)
        }
    }

    /// `POST …/transactions/{transactionId}/revoke`: support takes back what a transaction gave.
    func revoke(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .admin)
        let transactionID = try Self.parameter("transactionId", context)
        let (body, raw) = try await APIJSON.decode(RevokeBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateText(body.reason, field: "reason")
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let user = try await owner(of: transactionID, app: app)
            let revokedAt = body.revokedAt ?? Date()
            let outcome = try await execute(app: app, user: user, context, commandKey: commandKey) { state, _ in
                (try UserDecisions.revoke(transactionId: transactionID, revokedAt: revokedAt, reason: body.reason, on: state), ())
            }
            struct Answer: Encodable { let position: Int64; let transactionId: String; let revokedAt: Date }
            // A command recorded before under its key answers with the date it recorded.
            return try Reply(Answer(position: outcome.append?.position ?? 0, transactionId: transactionID,
                                    revokedAt: outcome.state.transactions[transactionID]?.revokedAt ?? revokedAt))
        }
    }

    /// `POST …/users/{userId}/consumptions`: the app used up units of a consumable; refused beyond the balance.
    func consume(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let user = try Self.parameter("userId", context)
        let (body, raw) = try await APIJSON.decode(ConsumptionBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateIdentifier(body.productId, field: "productId")
        try Self.validateIdentifier(body.deviceId, field: "deviceId")
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let outcome = try await execute(app: app, user: user, context, commandKey: commandKey) { state, catalog in
                guard state.version > 0 else { throw APIError.unknownUser(user) }
                guard catalog[body.productId] != nil || state.transactionsInOrder.contains(where: { $0.productId == body.productId }) else {
                    throw APIError(.notFound, "unknown_product", "product \(body.productId) is neither in the app's catalog nor bought by this user")
                }
                let events = try UserDecisions.consume(productId: body.productId, quantity: body.quantity, deviceId: body.deviceId,
                                                       catalog: catalog, on: state)
                return (events, ())
            }
            struct Answer: Encodable { let position: Int64; let productId: String; let quantity: Int; let balance: Int }
            return try Reply(Answer(position: outcome.append?.position ?? 0, productId: body.productId, quantity: body.quantity,
                                    balance: outcome.state.balance(of: body.productId)), status: .created)
        }
    }

    /// `POST …/users/{userId}/devices/{deviceId}/restore`: everything the user owns, for a device,
    /// recording which non-renewing periods the device received (the App Store never restores those).
    func restoreToDevice(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .ingest)
        let user = try Self.parameter("userId", context)
        let device = try Self.parameter("deviceId", context)
        let raw = try await APIJSON.body(of: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let outcome = try await execute(app: app, user: user, context, commandKey: commandKey) { state, catalog in
                guard state.version > 0 else { throw APIError.unknownUser(user) }
                let (events, periods) = UserDecisions.restoreNonRenewing(toDevice: device, catalog: catalog, on: state)
                let fresh = events.compactMap { event -> [String]? in
                    if case .subscriptionRestoredToDevice(let restored) = event.event { return restored.transactionIds }
                    return nil
                }.flatMap { $0 }
                return (events, (periods, fresh))
            }
            let position = try await position(of: outcome, app: app, user: user)
            let entitlements = EntitlementsBody(userId: user, position: position, state: outcome.state, catalog: outcome.catalog)
            let now = Date()
            struct Period: Encodable { let transactionId, productId, group: String; let start, end: Date; let active: Bool }
            struct Answer: Encodable {
                let position: Int64
                let deviceId: String
                let periods: [Period]
                let restoredTransactionIds: [String]
                let entitlements: EntitlementsBody
            }
            return try Reply(Answer(
                position: position, deviceId: device,
                periods: outcome.value.0.map {
                    Period(transactionId: $0.transactionId, productId: $0.productId, group: $0.group, start: $0.start, end: $0.end,
                           active: $0.isActive(at: now))
                },
                restoredTransactionIds: outcome.value.1, entitlements: entitlements
            ))
        }
    }

    /// The user an App Store transaction of the app is recorded for.
    func owner(of transactionID: String, app: String) async throws -> String {
        let keys = StoreEnvironment.allCases.flatMap { DeduplicationKey.claimsOf(transactionID: transactionID, app: app, environment: $0) }
        guard let stream = try await store.recorded(keys).values.first?.streamID,
              case .user(app, let user) = StreamID.kind(of: stream)
        else {
            throw APIError(.notFound, "unknown_transaction", "transaction \(transactionID) is not recorded for any user of \(app)")
        }
        return user
    }
}
