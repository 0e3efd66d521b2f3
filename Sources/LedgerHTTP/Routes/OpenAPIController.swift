import Foundation
import Hummingbird

/// `GET /openapi.json`: no auth; the OpenAPI 3.1 document of every route in `APIRoutes.all`.
public struct OpenAPIController: Sendable {
    /// The bundled document, read once per process.
    public static let document: ByteBuffer = {
        guard let url = Bundle.module.url(forResource: "openapi", withExtension: "json", subdirectory: "Resources"),
              let data = try? Data(contentsOf: url)
        else {
            // The file is a resource of this target: missing means a broken build, not bad input.
            fatalError("openapi.json is missing from the LedgerHTTP bundle")
        }
        return ByteBuffer(bytes: data)
    }()

    public init() {}

    public func addRoutes(to router: Router<some RequestContext>) {
        router.get("/openapi.json") { _, _ -> Response in
            var headers = HTTPFields()
            headers[.contentType] = "application/json; charset=utf-8"
            headers[.cacheControl] = "public, max-age=300"
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: Self.document))
        }
    }
}
