import Foundation
import Hummingbird
import LedgerApplication
import Logging

/// Who may call what: the bearer key, its scopes, and its one app.
struct APIAccess: Sendable {
    let directory: any AppDirectory

    /// The caller's key when it has `scope`; for app routes, the key must belong to `app`
    /// (another app's routes answer 404, so a key never learns which apps exist).
    func authorize(_ request: Request, _ context: inout LedgerRequestContext, scope: APIScope, app: String? = nil) async throws -> APIKey {
        let key = try await identify(request, &context)
        if let app, app != key.app {
            throw APIError.notFound("there is no app \(app) for this key")
        }
        guard key.scopes.contains(scope) else { throw APIError.forbidden(scope: scope.rawValue) }
        return key
    }

    /// The caller's key, whatever its scopes: 401 without a valid, unrevoked one.
    func identify(_ request: Request, _ context: inout LedgerRequestContext) async throws -> APIKey {
        guard let header = request.headers[.authorization] else { throw APIError.unauthorized }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer",
              let key = try await directory.authenticate(String(parts[1]).trimmingCharacters(in: .whitespaces))
        else { throw APIError.unauthorized }
        context.apiKey = key
        context.logger[metadataKey: "ledger.key_id"] = .string(key.keyId)
        return key
    }
}
