import Hummingbird
import Logging

/// Turns every error into the API's error body (`APIError(mapping:)`). Unexpected errors are
/// logged with the request id and answered as a 500 that says only that: internals never reach
/// a response.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch {
            guard let apiError = APIError(mapping: error) else {
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
                return try APIError(.internalServerError, "internal_error",
                                    "the ledger failed to answer; the request id is in the logs. A write is recorded whole or not at all: sent again with the same receipt or Idempotency-Key, it is recorded at most once.")
                    .response(from: request, context: context)
            }
            return try apiError.response(from: request, context: context)
        }
    }
}
