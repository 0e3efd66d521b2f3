import Foundation
import HTTPTypes
import Hummingbird
import Logging

/// Gives every request an id (the caller's `X-Request-Id` when it is sane), puts it in the logger's
/// metadata and the response headers, and logs one line per request with its outcome.
struct RequestIDMiddleware: RouterMiddleware {
    typealias Context = LedgerRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        let incoming = request.headers[.requestID]
        context.requestID = incoming.flatMap(Self.isSane) == true ? incoming! : Self.generate()
        context.logger[metadataKey: "ledger.request_id"] = .string(context.requestID)
        context.logger.debug("request received", metadata: ["http.method": "\(request.method)", "http.path": "\(request.uri.path)"])
        let started = ContinuousClock.now
        var response = try await next(request, context)
        response.headers[.requestID] = context.requestID
        let elapsed = ContinuousClock.now - started
        context.logger.info("request handled", metadata: [
            "http.method": "\(request.method)",
            "http.route": "\(context.endpointPath ?? "unmatched")",
            "http.status": "\(response.status.code)",
            "http.duration_ms": "\(elapsed / .milliseconds(1))",
        ])
        return response
    }

    static func isSane(_ id: String) -> Bool {
        (1...128).contains(id.utf8.count)
            && id.unicodeScalars.allSatisfy { $0.isASCII && (CharacterSet.alphanumerics.contains($0) || "-_.:".unicodeScalars.contains($0)) }
    }

    static func generate() -> String {
        UUID().uuidString.lowercased()
    }
}

extension HTTPField.Name {
    static let requestID = Self("X-Request-Id")!
    static let idempotencyKey = Self("Idempotency-Key")!
}
