import Foundation
import Hummingbird
import LedgerApplication
import LedgerDomain

extension LedgerAPI {
    struct ProductBody: Codable, Sendable {
        let type: String
        let duration: String?
        let group: String?
        let referenceName: String?
        let prices: [String: String]?
    }

    struct ProductView: Encodable, Sendable {
        let productId: String
        let type: String
        let duration: String?
        let group: String
        let referenceName: String?
        let prices: [String: String]

        init(_ product: Product) {
            productId = product.productId
            type = product.type.rawValue
            duration = product.duration?.description
            group = product.subscriptionGroup
            referenceName = product.referenceName
            prices = product.prices
        }
    }

    /// `PUT /v1/apps/{bundleId}/products/{productId}`: defines or redefines a product (an event on the catalog stream).
    func defineProduct(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, context) = try await authorizedApp(request, context, scope: .admin)
        let productID = try Self.parameter("productId", context)
        let (body, _) = try await APIJSON.decode(ProductBody.self, from: request, limit: APILimits.commandBodyBytes, timeout: configuration.bodyReadTimeout)
        guard let type = ProductType(rawValue: body.type), type != .unknown else {
            throw APIError.invalidRequest(
                "type '\(body.type)' is not a product type: consumable, non_consumable, auto_renewable, non_renewing or free_subscription",
                field: "type"
            )
        }
        for (field, value) in [("group", body.group), ("referenceName", body.referenceName)] {
            if let value { try Self.validateIdentifier(value, field: field) }
        }
        guard (body.prices?.count ?? 0) <= 200 else {
            throw APIError.invalidRequest("prices lists at most 200 currencies", field: "prices")
        }
        let duration: ISODuration?
        do {
            duration = try body.duration.map { try ISODuration(parsing: $0) }
        } catch {
            throw APIError.invalidRequest("duration '\(body.duration ?? "")' is not an ISO 8601 duration such as P1M or P1Y", field: "duration")
        }
        let product: Product
        do {
            product = try Product(productId: productID, type: type, duration: duration, subscriptionGroup: body.group,
                                  referenceName: body.referenceName, prices: body.prices ?? [:])
        } catch {
            throw APIError.invalidRequest(error.message)
        }
        let (changed, position) = try await services.commands.defineProduct(product, app: app, metadata: Self.metadata(context))
        struct Answer: Encodable { let product: ProductView; let changed: Bool; let position: Int64 }
        return try APIJSON.response(Answer(product: ProductView(product), changed: changed, position: position))
    }

    /// `GET /v1/apps/{bundleId}/products`: the catalog, with validators for caching.
    func products(_ request: Request, _ context: LedgerRequestContext) async throws -> Response {
        let (app, _) = try await authorizedApp(request, context, scope: .read)
        let catalog = try await catalogState(app: app)
        let etag = "W/\"catalog-\(catalog.version)\""
        var headers: HTTPFields = [.eTag: etag, .cacheControl: "no-cache"]
        if let modified = catalog.modified { headers[.lastModified] = Self.httpDate(modified) }
        let notModified: Bool
        if let match = request.headers[.ifNoneMatch] {
            notModified = match.split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == etag || $0 == "*" }
        } else if let since = request.headers[.ifModifiedSince].flatMap(Self.parseHTTPDate), let modified = catalog.modified {
            notModified = modified.timeIntervalSince1970.rounded(.down) <= since.timeIntervalSince1970
        } else {
            notModified = false
        }
        if notModified { return Response(status: .notModified, headers: headers) }
        struct Answer: Encodable { let products: [ProductView]; let position: Int64 }
        return try APIJSON.response(Answer(products: catalog.products.map(ProductView.init), position: catalog.position), headers: headers)
    }

    /// The catalog, with its stream's version, last position and last change.
    func catalogState(app: String) async throws -> (products: [Product], version: Int64, position: Int64, modified: Date?) {
        let (catalog, events) = try await services.reader.catalogStream(app: app)
        let products = catalog.products.values.sorted { $0.productId < $1.productId }
        return (products, Int64(events.count), events.last?.position ?? 0, events.last?.recordedAt)
    }

    static func httpDate(_ date: Date) -> String {
        httpDateFormatter.string(from: date)
    }

    static func parseHTTPDate(_ text: String) -> Date? {
        httpDateFormatter.date(from: text)
    }

    private static var httpDateFormatter: DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss 'GMT'"
        return formatter
    }
}
