import Foundation
import Hummingbird
import LedgerApplication

/// An error as the API reports it: `{"error":{"code","message","requestId",…}}` with its status.
///
/// Every failure becomes one of these at the edge (`ErrorMiddleware`, through the one mapping in
/// `APIError+Mapping.swift`); database errors and other internals never reach a response body.
public struct APIError: Error, HTTPResponseError, Sendable, CustomStringConvertible {
    public let status: HTTPResponse.Status
    public let code: String
    public let message: String
    public var retryable: Bool?
    public var position: Int64?
    public var balance: Int?
    public var field: String?
    /// The App Store receipt status, for `invalid_receipt`.
    public var appStoreStatus: Int?
    var headers: HTTPFields = [:]

    public init(_ status: HTTPResponse.Status, _ code: String, _ message: String) {
        self.status = status
        self.code = code
        self.message = message
    }

    public var description: String { "\(status.code) \(code): \(message)" }

    struct Body: Encodable {
        struct Detail: Encodable {
            let code: String
            let message: String
            let requestId: String?
            let retryable: Bool?
            let position: Int64?
            let balance: Int?
            let field: String?
            let status: Int?
        }

        let error: Detail
    }

    func body(requestID: String?) -> Body {
        Body(error: .init(code: code, message: message, requestId: requestID, retryable: retryable, position: position,
                          balance: balance, field: field, status: appStoreStatus))
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let requestID = (context as? LedgerRequestContext)?.requestID
        var response = try APIJSON.response(body(requestID: requestID), status: status)
        for field in headers { response.headers.append(field) }
        return response
    }

    // MARK: The errors of the API

    public static func invalidRequest(_ message: String, field: String? = nil) -> Self {
        var error = APIError(.badRequest, "invalid_request", message)
        error.field = field
        return error
    }

    public static func invalidJSON(_ message: String) -> Self {
        APIError(.badRequest, "invalid_json", message)
    }

    public static let unauthorized = APIError(
        .unauthorized, "unauthorized",
        "send a valid API key as 'Authorization: Bearer <key>'; `ledger keys create` makes one"
    )

    public static func forbidden(scope: String) -> Self {
        APIError(.forbidden, "forbidden", "this key lacks the '\(scope)' scope this route needs; create a key with it (`ledger keys create --app <bundle id> --scope \(scope)`)")
    }

    public static func notFound(_ message: String) -> Self {
        APIError(.notFound, "not_found", message)
    }

    public static func unknownUser(_ user: String) -> Self {
        APIError(.notFound, "unknown_user", "user \(user) has nothing recorded in this app")
    }

    public static func bodyTooLarge(limit: Int) -> Self {
        APIError(.contentTooLarge, "body_too_large", "the request body is larger than this route accepts (\(limit) bytes)")
    }

    public static func bodyTimeout(_ timeout: Duration) -> Self {
        var error = APIError(.requestTimeout, "body_timeout",
                             "the request body did not arrive within \(Int(timeout / .milliseconds(1))) ms; nothing was recorded, send it again")
        error.retryable = true
        return error
    }

    /// More API requests are in flight than `limit`: answered at once, before any work.
    public static func overloaded(limit: Int) -> Self {
        .unavailable("overloaded", "the ledger is already answering \(limit) requests, as many as it takes at once; nothing was done, retry in a moment")
    }

    public static func conflict(_ code: String, _ message: String, position: Int64? = nil) -> Self {
        var error = APIError(.conflict, code, message)
        error.position = position
        return error
    }

    public static func unprocessable(_ code: String, _ message: String) -> Self {
        APIError(.unprocessableContent, code, message)
    }

    public static func unavailable(_ code: String, _ message: String, retryable: Bool = true, position: Int64? = nil) -> Self {
        var error = APIError(.serviceUnavailable, code, message)
        error.retryable = retryable
        error.position = position
        error.headers[.retryAfter] = "1"
        return error
    }
}
