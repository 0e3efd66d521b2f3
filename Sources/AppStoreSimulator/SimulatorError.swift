import AppStore
import Foundation
import Hummingbird

/// A refused admin request to the simulator, answered as `{"error":{"code","message"}}`.
public struct SimulatorError: Error, Sendable, CustomStringConvertible, HTTPResponseError {
    private enum Code: String, Sendable {
        case badRequest = "bad_request"
        case notFound = "not_found"
        case conflict = "conflict"
    }

    private let code: Code
    public let message: String

    private init(_ code: Code, _ message: String) {
        self.code = code
        self.message = message
    }

    public static func badRequest(_ message: String) -> Self { .init(.badRequest, message) }
    public static func notFound(_ message: String) -> Self { .init(.notFound, message) }
    public static func conflict(_ message: String) -> Self { .init(.conflict, message) }

    public var description: String { "\(code.rawValue): \(message)" }

    public var status: HTTPResponse.Status {
        switch code {
        case .badRequest: .badRequest
        case .notFound: .notFound
        case .conflict: .conflict
        }
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        let body = ["error": ["code": code.rawValue, "message": message]]
        let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys, .withoutEscapingSlashes])
        var headers = HTTPFields()
        headers[.contentType] = "application/json; charset=utf-8"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
