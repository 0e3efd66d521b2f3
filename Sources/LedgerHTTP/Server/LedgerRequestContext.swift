import Hummingbird
import LedgerApplication
import Logging

/// The context of one request: Hummingbird's core, the request id, and the key that called.
public struct LedgerRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Echoes a sane `X-Request-Id` from the caller, else generated; in every log line and error body.
    public var requestID: String
    /// Set once the route has authorized the caller.
    public var apiKey: APIKey?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        requestID = ""
        apiKey = nil
    }

    /// Request bodies are read with a per-route limit (`APILimits`); this is the outer bound.
    public var maxUploadSize: Int { APILimits.receiptBodyBytes }
}
