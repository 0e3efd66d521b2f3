import Foundation
import HTTPTypes
import Hummingbird

/// `GET /finance`: the finance page, and the script and style it loads, all served from this
/// target's resources (no CDN: the page works on networks without the internet).
///
/// The page reads the documented audit routes with a `finance` key that it keeps in the
/// browser's session storage and sends as the bearer header; the Content-Security-Policy lets it
/// load nothing but these files and talk to nothing but this server.
public struct FinancePageController: Sendable {
    struct Asset: Sendable {
        let body: ByteBuffer
        let contentType: String
    }

    /// The page's files by the path they are served at, read once per process.
    static let assets: [String: Asset] = {
        let files = [
            ("/finance", "index.html", "text/html; charset=utf-8"),
            ("/finance/finance.js", "finance.js", "text/javascript; charset=utf-8"),
            ("/finance/finance.css", "finance.css", "text/css; charset=utf-8"),
        ]
        var assets: [String: Asset] = [:]
        for (path, file, contentType) in files {
            let name = (file as NSString).deletingPathExtension, ext = (file as NSString).pathExtension
            guard let url = Bundle.module.url(forResource: name, withExtension: ext, subdirectory: "Resources/finance"),
                  let data = try? Data(contentsOf: url)
            else {
                // The files are resources of this target: missing means a broken build, not bad input.
                fatalError("\(file) is missing from the LedgerHTTP bundle")
            }
            assets[path] = Asset(body: ByteBuffer(bytes: data), contentType: contentType)
        }
        return assets
    }()

    static let securityHeaders: HTTPFields = [
        .contentSecurityPolicy: "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
            + "form-action 'none'; frame-ancestors 'none'; base-uri 'none'",
        .xContentTypeOptions: "nosniff",
        .referrerPolicy: "no-referrer",
        .cacheControl: "no-cache",
    ]

    public init() {}

    public func addRoutes(to router: Router<some RequestContext>) {
        for (path, asset) in Self.assets {
            router.get(RouterPath(path)) { _, _ -> Response in
                var headers = Self.securityHeaders
                headers[.contentType] = asset.contentType
                return Response(status: .ok, headers: headers, body: .init(byteBuffer: asset.body))
            }
        }
    }
}

extension HTTPField.Name {
    static let referrerPolicy = Self("Referrer-Policy")!
}
