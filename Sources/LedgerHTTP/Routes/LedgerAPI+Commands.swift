import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain

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
            let (position, duplicate) = try await services.commands.finish(
                transactionId: transactionID, deviceId: body.deviceId, app: app, metadata: Self.metadata(context), commandKey: commandKey
            )
            struct Answer: Encodable { let position: Int64; let transactionId: String; let duplicate: Bool }
            return try Reply(Answer(position: position, transactionId: transactionID, duplicate: duplicate))
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
            let position = try await services.commands.recordFailure(
                userId: body.userId, deviceId: body.deviceId, productId: body.productId, errorCode: body.errorCode, cancelled: body.cancelled,
                app: app, metadata: Self.metadata(context), commandKey: commandKey
            )
            struct Answer: Encodable { let position: Int64 }
            return try Reply(Answer(position: position), status: .created)
        }
    }

    /// `POST …/transactions/{transactionId}/revoke`: support takes back what a transaction gave.
    func revoke(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .admin)
        let transactionID = try Self.parameter("transactionId", context)
        let (body, raw) = try await APIJSON.decode(RevokeBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        try Self.validateText(body.reason, field: "reason")
        return try await idempotent(request, context, app: app, body: raw) { commandKey in
            let (position, revokedAt) = try await services.commands.revoke(
                transactionId: transactionID, reason: body.reason, revokedAt: body.revokedAt ?? Date(), app: app,
                metadata: Self.metadata(context), commandKey: commandKey
            )
            struct Answer: Encodable { let position: Int64; let transactionId: String; let revokedAt: Date }
            return try Reply(Answer(position: position, transactionId: transactionID, revokedAt: revokedAt))
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
            let (position, balance) = try await services.commands.consume(
                productId: body.productId, quantity: body.quantity, deviceId: body.deviceId, user: user, app: app,
                metadata: Self.metadata(context), commandKey: commandKey
            )
            struct Answer: Encodable { let position: Int64; let productId: String; let quantity: Int; let balance: Int }
            return try Reply(Answer(position: position, productId: body.productId, quantity: body.quantity, balance: balance), status: .created)
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
            let restore = try await services.commands.restore(
                toDevice: device, user: user, app: app, metadata: Self.metadata(context), commandKey: commandKey
            )
            let entitlements = EntitlementsBody(userId: user, position: restore.position, state: restore.state, catalog: restore.catalog)
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
                position: restore.position, deviceId: device,
                periods: restore.periods.map {
                    Period(transactionId: $0.transactionId, productId: $0.productId, group: $0.group, start: $0.start, end: $0.end,
                           active: $0.isActive(at: now))
                },
                restoredTransactionIds: restore.restoredTransactionIds, entitlements: entitlements
            ))
        }
    }
}
