import Foundation
import Hummingbird
import LedgerApplication
import NIOCore

extension LedgerAPI {
    /// `GET /v1/audit/reconciliation?from=&to=[&timeZone=]`: the key's app's sales beside Apple's
    /// imported Summary Sales Reports, per reporting day, product, country, currency and price,
    /// each difference explained where the ledger can, with the transactions behind it; CSV with
    /// `Accept: text/csv`.
    func auditReconciliation(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        guard let reconcile = services.reconciliation else {
            throw APIError.unavailable("reports_unavailable", "this server keeps no sales reports", retryable: false)
        }
        try await waitForAuditTrail(request)
        let query = request.uri.queryParameters
        guard let from = query.get("from") else { throw APIError.invalidRequest("from is required: the first reporting day, yyyy-MM-dd", field: "from") }
        guard let to = query.get("to") else { throw APIError.invalidRequest("to is required: the last reporting day, yyyy-MM-dd", field: "to") }
        let reconciliation = try await reconcile.reconcile(app: key.app, from: from, to: to, timeZone: query.get("timeZone"))
        if request.headers[.accept]?.contains("text/csv") == true {
            return Response(status: .ok, headers: Self.csvHeaders(filename: "reconciliation-\(key.app)-\(from)-\(to).csv"),
                            body: .init(byteBuffer: ByteBuffer(string: ReconciliationCSV.document(reconciliation))))
        }
        return try APIJSON.response(reconciliation)
    }
}
