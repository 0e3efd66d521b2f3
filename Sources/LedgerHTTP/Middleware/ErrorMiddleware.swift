import Hummingbird
import Logging
import NIOCore
import Synchronization

/// Turns every error into the API's error body (`APIError(mapping:)`). Unexpected errors are
/// logged with the request id and answered as a 500 that says only that: internals never reach
/// a response.
///
/// An error answer to a request whose body was not read to its end (a refusal comes before the
/// body is read) ends the connection: `Connection: close`, carried out by
/// `ConnectionCloseHandler`. Reading an unwanted body to its end, to reach the next request,
/// would let any caller make the server read without bound. Answers to requests whose body was
/// read (a 409, a 422) keep the connection.
struct ErrorMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        let bodyRead = BodyReadMark()
        if Self.carriesBody(request) {
            request.body = RequestBody(asyncSequence: MarkedBody(base: request.body, mark: bodyRead))
        }
        do {
            return try await next(request, context)
        } catch {
            var response: Response
            if let refusal = Self.wrongMethod(error, request) {
                response = try refusal.response(from: request, context: context)
            } else if let apiError = APIError(mapping: error) {
                response = try apiError.response(from: request, context: context)
            } else {
                context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
                response = try APIError(.internalServerError, "internal_error",
                                        "the ledger failed to answer; the request id is in the logs. A write is recorded whole or not at all: sent again with the same receipt or Idempotency-Key, it is recorded at most once.")
                    .response(from: request, context: context)
            }
            if Self.carriesBody(request), !bodyRead.reachedEnd { response.headers[.connection] = "close" }
            return response
        }
    }

    /// The router answers a path it has with another method "not found": the caller is told the
    /// route is there, with the methods it takes (405, `Allow`).
    static func wrongMethod(_ error: any Error, _ request: Request) -> APIError? {
        guard let error = error as? HTTPError, error.status == .notFound else { return nil }
        let allowed = APIRoutes.methods(of: request.uri.path)
        guard !allowed.isEmpty else { return nil }
        let names = allowed.map(\.rawValue).joined(separator: ", ")
        var refusal = APIError(.methodNotAllowed, "method_not_allowed", "\(request.uri.path) takes \(names), not \(request.method.rawValue); /openapi.json lists the routes")
        refusal.headers[.allow] = names
        return refusal
    }

    static func carriesBody(_ request: Request) -> Bool {
        if let length = request.headers[.contentLength] { return length != "0" }
        return request.headers[.transferEncoding] != nil
    }
}

/// Set once a request's body has been read to its end.
private final class BodyReadMark: Sendable {
    private let reached = Atomic<Bool>(false)

    var reachedEnd: Bool { reached.load(ordering: .acquiring) }

    func markEnd() { reached.store(true, ordering: .releasing) }
}

/// A request body that marks when its end is read.
private struct MarkedBody: AsyncSequence, Sendable {
    typealias Element = ByteBuffer

    let base: RequestBody
    let mark: BodyReadMark

    struct AsyncIterator: AsyncIteratorProtocol {
        var base: RequestBody.AsyncIterator
        let mark: BodyReadMark

        mutating func next() async throws -> ByteBuffer? {
            let part = try await base.next()
            if part == nil { mark.markEnd() }
            return part
        }
    }

    func makeAsyncIterator() -> AsyncIterator {
        AsyncIterator(base: base.makeAsyncIterator(), mark: mark)
    }
}
