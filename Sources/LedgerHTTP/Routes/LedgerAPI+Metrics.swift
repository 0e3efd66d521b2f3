import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain

extension LedgerAPI {
    /// `GET /v1/audit/metrics?from&to[&interval=month|day][&timeZone][&environment][&asOf][&reportingCurrency]`:
    /// MRR, active subscriptions and their movement, trials, churn, refund rates and the cohort
    /// table, per interval and currency, as the log stood at `asOf` (default now), and also in one
    /// reporting currency at the operator's exchange rates when one is asked for.
    func auditMetrics(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        guard let metrics = services.metrics else {
            throw APIError.unavailable("metrics_unavailable", "this server reads no metrics", retryable: false)
        }
        try await waitForAuditTrail(request)
        let query = request.uri.queryParameters
        guard let fromText = query.get("from") else { throw APIError.invalidRequest("from is required: an ISO 8601 time", field: "from") }
        guard let toText = query.get("to") else { throw APIError.invalidRequest("to is required: an ISO 8601 time", field: "to") }
        let from = try AuditFilter.time(fromText, field: "from")
        let to = try AuditFilter.time(toText, field: "to")
        let asOf = try query.get("asOf").map { text throws(AuditQueryError) in try AuditFilter.time(text, field: "asOf") }
        let interval = query.get("interval") ?? "month"
        guard interval == "month" || interval == "day" else {
            throw APIError.invalidRequest("interval is month or day, not '\(interval)'", field: "interval")
        }
        let environment: StoreEnvironment
        switch query.get("environment") ?? "production" {
        case "production": environment = .production
        case "sandbox": environment = .sandbox
        case let other: throw APIError.invalidRequest("environment is production or sandbox, not '\(other)': metrics never add the two", field: "environment")
        }
        return try APIJSON.response(try await metrics.metrics(
            app: key.app, environment: environment, from: from, to: to, byMonth: interval == "month", timeZone: query.get("timeZone") ?? "UTC", asOf: asOf,
            reportingCurrency: query.get("reportingCurrency")
        ))
    }
}
