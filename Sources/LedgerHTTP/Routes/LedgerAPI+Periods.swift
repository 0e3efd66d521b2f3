import Foundation
import Hummingbird
import LedgerApplication
import NIOCore

extension LedgerAPI {
    func periodsService() throws -> ClosePeriods {
        guard let periods = services.periods else {
            throw APIError.unavailable("periods_unavailable", "this server keeps no closed periods", retryable: false)
        }
        return periods
    }

    /// `GET /v1/audit/periods`: the key's app's closed (and reopened) months.
    func auditPeriods(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        struct Answer: Encodable { let periods: [PeriodStatus] }
        return try APIJSON.response(Answer(periods: try await periodsService().statuses(app: key.app)))
    }

    /// `GET /v1/audit/periods/{period}`: a closed month's frozen figures, as the close recorded them.
    func auditPeriod(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        let period = try context.parameters.require("period")
        guard let status = try await periodsService().status(app: key.app, period: period) else {
            throw PeriodError(.periodNeverClosed, "\(period) was never closed: its figures are the audit trail's (/v1/audit/summary)")
        }
        return try APIJSON.response(status)
    }

    /// `POST /v1/audit/periods/{period}/close` `{timeZone?}`: closes a month, signed with the server's anchor key.
    func closePeriod(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        let period = try context.parameters.require("period")
        struct Body: Decodable { let timeZone: String? }
        let body = try await Self.optionalBody(Body.self, request, configuration)
        guard let signer = services.periodSigner else {
            throw PeriodError(.noSigningKey, "this server has no anchor key to sign a close with: start it with LEDGER_ANCHOR_KEY_FILE, or close with `ledger audit close --key FILE`")
        }
        try await waitForAuditTrail(request)
        let status = try await periodsService().close(app: key.app, period: period, timeZone: body?.timeZone ?? "UTC", closedBy: "key:\(key.keyId)",
                                                      signer: signer)
        return try APIJSON.response(status, status: .created)
    }

    /// `POST /v1/audit/periods/{period}/reopen` `{reason}`.
    func reopenPeriod(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        let period = try context.parameters.require("period")
        struct Body: Decodable { let reason: String }
        let (body, _) = try await APIJSON.decode(Body.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        return try APIJSON.response(try await periodsService().reopen(app: key.app, period: period, reason: body.reason, reopenedBy: "key:\(key.keyId)"))
    }

    /// `GET /v1/audit/adjustments?period=yyyy-MM`: what changed a closed month since its close, and why; CSV too.
    func auditAdjustments(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        guard let period = request.uri.queryParameters.get("period") else {
            throw APIError.invalidRequest("period is required: the closed month, yyyy-MM", field: "period")
        }
        try await waitForAuditTrail(request)
        let adjustments = try await periodsService().adjustments(app: key.app, period: period)
        if request.headers[.accept]?.contains("text/csv") == true {
            return Response(status: .ok, headers: Self.csvHeaders(filename: "adjustments-\(key.app)-\(period).csv"),
                            body: .init(byteBuffer: ByteBuffer(string: AdjustmentCSV.header + adjustments.map(AdjustmentCSV.line).joined())))
        }
        struct Answer: Encodable { let period: String; let adjustments: [PeriodAdjustment] }
        return try APIJSON.response(Answer(period: period, adjustments: adjustments))
    }

    /// A JSON body that may be absent (an empty POST).
    static func optionalBody<Value: Decodable>(_ type: Value.Type, _ request: Request, _ configuration: Configuration) async throws -> Value? {
        guard let length = request.headers[.contentLength], length != "0" else { return nil }
        return try await APIJSON.decode(Value.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout).0
    }
}
