import Foundation
import HTTPTypes
import Hummingbird
import LedgerApplication
import LedgerDomain
import LedgerProjections
import Logging
import NIOCore

extension LedgerAPI {
    /// `GET /v1/audit/events`: the money-relevant events of the key's app, filtered, in log order.
    /// JSON pages with `nextCursor`; with `Accept: text/csv`, RFC 4180 CSV with a header row: every
    /// matching row streamed, or one page when `cursor` or `limit` is given (`X-Next-Cursor` then).
    func auditEvents(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        try await waitForAuditTrail(request)
        let filter = try Self.auditFilter(request)
        let audit = services.audit
        let cursorText = request.uri.queryParameters.get("cursor")
        let limit = try Self.integerQuery("limit", request, range: 1...Int64(AuditPage.maximumSize))
        let wantsCSV = request.headers[.accept]?.contains("text/csv") == true
        let cursor = try cursorText.map { text throws(AuditQueryError) in try AuditCursor(parsing: text, app: key.app) }
        if wantsCSV && cursor == nil && limit == nil {
            // Once the 200 is sent an error can only cut the body short: a trail not ready is found first.
            _ = try await audit.events(app: key.app, filter: filter, after: nil, limit: 1)
            let app = key.app
            let logger = context.logger
            let body = ResponseBody { writer in
                var chunk = AuditCSV.header
                try await audit.forEachEvent(app: app, filter: filter, pageSize: 1_000) { row in
                    chunk += AuditCSV.line(row)
                    if chunk.utf8.count > 64 * 1024 {
                        try await writer.write(ByteBuffer(string: chunk))
                        chunk = ""
                    }
                }
                try await writer.write(ByteBuffer(string: chunk))
                try await writer.finish(nil)
                logger.debug("audit csv streamed")
            }
            return Response(status: .ok, headers: Self.csvHeaders(filename: "audit-\(app).csv"), body: body)
        }
        let page = try await audit.events(app: key.app, filter: filter, after: cursor, limit: Int(limit ?? Int64(APILimits.defaultPageSize)))
        if wantsCSV {
            var headers = Self.csvHeaders(filename: "audit-\(key.app).csv")
            if let next = page.nextCursor { headers[.nextCursor] = next.text }
            let text = AuditCSV.header + page.rows.map(AuditCSV.line).joined()
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        return try APIJSON.response(AuditPageAnswer(field: "events", rows: page.rows, nextCursor: page.nextCursor?.text))
    }

    /// `GET /v1/audit/summary`: units and money per day, product, currency, environment and storefront, refunds apart.
    func auditSummary(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        try await waitForAuditTrail(request)
        let filter = try Self.auditFilter(request)
        let groups = try request.uri.queryParameters.get("groupBy").map { text throws(AuditQueryError) in try AuditGrouping.parse(list: text) }
            ?? Set(AuditGrouping.allCases)
        let rows = try await services.audit.summary(app: key.app, filter: filter, groupBy: groups)
        if request.headers[.accept]?.contains("text/csv") == true {
            let text = AuditCSV.summaryHeader + rows.map(AuditCSV.line).joined()
            return Response(status: .ok, headers: Self.csvHeaders(filename: "audit-summary-\(key.app).csv"),
                            body: .init(byteBuffer: ByteBuffer(string: text)))
        }
        // Closed months the rows fall in: their figures here are the trail's as it is now; the frozen
        // ones, and what changed since, are at /v1/audit/periods/{period} and /v1/audit/adjustments.
        struct ClosedMonth: Encodable { let period: String; let closedAt: Date; let closePosition: Int64; let figures: String; let adjustments: String }
        let closed = try await services.periods?.statuses(app: key.app).filter { status in
            status.state == .closed && filter.to.map { status.from < $0 } ?? true && filter.from.map { status.to > $0 } ?? true
        } ?? []
        struct Answer: Encodable { let environment: String; let groupBy: [String]; let rows: [AuditSummaryRow]; let closedPeriods: [ClosedMonth] }
        return try APIJSON.response(Answer(
            environment: filter.environment.rawValue, groupBy: AuditGrouping.effective(groups, for: filter).map(\.rawValue).sorted(), rows: rows,
            closedPeriods: closed.map {
                ClosedMonth(period: $0.period, closedAt: $0.closedAt, closePosition: $0.closePosition, figures: "/v1/audit/periods/\($0.period)",
                            adjustments: "/v1/audit/adjustments?period=\($0.period)")
            }
        ))
    }

    /// `GET /v1/audit/unclassified`: products money was taken for that the catalog does not know.
    func auditUnclassified(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        try await waitForAuditTrail(request)
        let products = try await services.audit.unclassified(app: key.app)
        struct Answer: Encodable { let products: [UnclassifiedProduct] }
        return try APIJSON.response(Answer(products: products))
    }

    /// `GET /v1/audit/restores`: non-renewing periods the ledger restored to users' devices, by
    /// when it recorded them; JSON pages with `nextCursor`, or CSV with `Accept: text/csv` (one
    /// page of up to `limit` rows, the whole list when neither `cursor` nor `limit` is given).
    func auditRestores(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.authorize(request, &context, scope: .finance)
        try await waitForAuditTrail(request, also: [.deviceDeliveries])
        let filter = try Self.auditFilter(request)
        for field in ["type", "currency", "priced", "productType"] where request.uri.queryParameters.get(field) != nil {
            throw APIError.invalidRequest("\(field) does not apply to restores: a restore moves no money; leave it out", field: field)
        }
        let audit = services.audit
        let cursor = try request.uri.queryParameters.get("cursor").map { text throws(AuditQueryError) in
            try AuditRestoreCursor(parsing: text, app: key.app)
        }
        let limit = try Self.integerQuery("limit", request, range: 1...Int64(AuditPage.maximumSize))
        if request.headers[.accept]?.contains("text/csv") == true {
            if cursor == nil && limit == nil {
                // The whole list, streamed a page at a time: never built whole in memory. Once the
                // 200 is sent an error can only cut the body short, so a first page is read first.
                let first = try await audit.restores(app: key.app, filter: filter, after: nil, limit: AuditPage.maximumSize)
                let app = key.app
                let body = ResponseBody { writer in
                    var page = first
                    try await writer.write(ByteBuffer(string: AuditCSV.restoreHeader + page.rows.map(AuditCSV.line).joined()))
                    while let next = page.nextCursor {
                        page = try await audit.restores(app: app, filter: filter, after: next, limit: AuditPage.maximumSize)
                        try await writer.write(ByteBuffer(string: page.rows.map(AuditCSV.line).joined()))
                    }
                    try await writer.finish(nil)
                }
                return Response(status: .ok, headers: Self.csvHeaders(filename: "audit-restores-\(key.app).csv"), body: body)
            }
            let page = try await audit.restores(app: key.app, filter: filter, after: cursor, limit: Int(limit ?? Int64(AuditPage.maximumSize)))
            var headers = Self.csvHeaders(filename: "audit-restores-\(key.app).csv")
            if let next = page.nextCursor { headers[.nextCursor] = next.text }
            return Response(status: .ok, headers: headers,
                            body: .init(byteBuffer: ByteBuffer(string: AuditCSV.restoreHeader + page.rows.map(AuditCSV.line).joined())))
        }
        let page = try await audit.restores(app: key.app, filter: filter, after: cursor, limit: Int(limit ?? Int64(APILimits.defaultPageSize)))
        return try APIJSON.response(AuditPageAnswer(field: "restores", rows: page.rows, nextCursor: page.nextCursor?.text))
    }

    /// `GET /v1/key`: the caller's own key, whatever its scopes: its app, scopes and name, so a
    /// client (the finance page) can say which app it is looking at and what it may do.
    func keyInfo(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        var context = context
        let key = try await access.identify(request, &context)
        struct Answer: Encodable {
            let keyId: String
            let app: String
            let scopes: [String]
            /// Null when the key has none.
            @NullWhenAbsent var name: String?
        }
        return try APIJSON.response(Answer(keyId: key.keyId, app: key.app, scopes: key.scopes.map(\.rawValue).sorted(), name: key.name))
    }

    /// With `minPosition`, waits (bounded) until the audit trail reflects the log up to it, as the user reads do.
    /// Either way, 503 `projections_behind` when the audit trail has no live version (building or failed).
    func waitForAuditTrail(_ request: Request, also others: [ProjectionName] = []) async throws {
        let projections = [.auditTrail] + others
        guard let minimum = try Self.integerQuery("minPosition", request, range: 0...Int64.max) else {
            _ = try await services.reads.checkpoint(of: projections)
            return
        }
        _ = try await services.reads.waitForProjections(projections, toReach: minimum, timeout: configuration.readWaitTimeout)
    }

    static func auditFilter(_ request: Request) throws -> AuditFilter {
        let query = request.uri.queryParameters
        var filter = AuditFilter()
        filter.from = try query.get("from").map { text throws(AuditQueryError) in try AuditFilter.time(text, field: "from") }
        filter.to = try query.get("to").map { text throws(AuditQueryError) in try AuditFilter.time(text, field: "to") }
        filter.events = try query.get("type").map { text throws(AuditQueryError) in try AuditEventKind.parse(list: text) } ?? []
        filter.environment = try query.get("environment").map { text throws(AuditQueryError) in try AuditFilter.environment(named: text) }
            ?? .production
        if let product = query.get("productId") { try validateIdentifier(product, field: "productId"); filter.productId = product }
        if let user = query.get("userId") { try validateIdentifier(user, field: "userId"); filter.userId = user }
        filter.currency = query.get("currency")
        if let type = query.get("productType") {
            guard let productType = ProductType(rawValue: type) else {
                throw APIError.invalidRequest(
                    "productType '\(type)' is not one of \(ProductType.allCases.map(\.rawValue).joined(separator: ", "))", field: "productType"
                )
            }
            filter.productType = productType
        }
        switch query.get("priced") {
        case nil: break
        case "true": filter.priced = true
        case "false": filter.priced = false
        case let text?: throw APIError.invalidRequest("priced '\(text)' is not true or false", field: "priced")
        }
        try filter.validate()
        return filter
    }

    static func csvHeaders(filename: String) -> HTTPFields {
        [.contentType: "text/csv; charset=utf-8; header=present", .contentDisposition: "attachment; filename=\"\(filename)\"",
         .cacheControl: "no-store"]
    }
}

/// One page of a paged audit route: its rows under `field`, and `nextCursor`, written as null on
/// the last page so clients can test for it.
struct AuditPageAnswer<Row: Encodable>: Encodable {
    let field: String
    let rows: [Row]
    let nextCursor: String?

    private struct Key: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(rows, forKey: Key(stringValue: field))
        try container.encode(nextCursor, forKey: Key(stringValue: "nextCursor"))
    }
}

extension HTTPField.Name {
    static let nextCursor = Self("X-Next-Cursor")!
}
