import Hummingbird
import LedgerDomain
import LedgerStore
import Logging

/// Turns every error into the API's error body. Unexpected errors are logged with the request id
/// and answered as a 500 that says only that: internals never reach a response.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            return try await next(request, context)
        } catch let error as APIError {
            return try error.response(from: request, context: context)
        } catch let error as HTTPError {
            return try Self.translate(error).response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            return try APIError(error.status, "http_\(error.status.code)", error.status.reasonPhrase).response(from: request, context: context)
        } catch let error as ReadError {
            return try APIError(error).response(from: request, context: context)
        } catch let error as AuditQueryError {
            return try APIError(error).response(from: request, context: context)
        } catch let error as LedgerInputError {
            // Input the domain refuses is the caller's to fix, whichever route met it.
            return try APIError.invalidRequest(error.message).response(from: request, context: context)
        } catch is CancellationError {
            return try APIError.unavailable("shutting_down", "the ledger is shutting down; retry").response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return try APIError(.internalServerError, "internal_error",
                                "the ledger failed to answer; the request id is in the logs. Nothing partial was recorded.")
                .response(from: request, context: context)
        }
    }

    static func translate(_ error: HTTPError) -> APIError {
        switch error.status {
        case .notFound: .notFound("there is no such route; /openapi.json lists them")
        case .methodNotAllowed: APIError(.methodNotAllowed, "method_not_allowed", "this route does not take that method; /openapi.json lists them")
        case .contentTooLarge: .bodyTooLarge(limit: APILimits.receiptBodyBytes)
        default: APIError(error.status, "http_\(error.status.code)", error.body ?? error.status.reasonPhrase)
        }
    }
}
