import Foundation
import Hummingbird
import LedgerDomain
import NIOCore

/// JSON as the API writes and reads it: camelCase keys, ISO 8601 UTC times, decimal text for money.
public enum APIJSON {
    static func makeEncoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(LedgerJSON.formatTimestamp(date))
        }
        return encoder
    }

    static func makeDecoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = LedgerJSON.parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "'\(text)' is not an ISO 8601 UTC time such as 2026-01-31T12:00:00Z"
                )
            }
            return date
        }
        return decoder
    }

    /// Encodes `value` as the body of a response.
    public static func response(_ value: some Encodable, status: HTTPResponse.Status = .ok, headers extra: HTTPFields = [:]) throws -> Response {
        try response(data: makeEncoder().encode(value), status: status, headers: extra)
    }

    static func response(data: Data, status: HTTPResponse.Status, headers extra: HTTPFields = [:]) -> Response {
        var headers: HTTPFields = [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"]
        for field in extra { headers[field.name] = field.value }
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// Reads the body (at most `limit` bytes, within `timeout`) and decodes it, turning every failure into an error that names the problem.
    static func decode<Value: Decodable>(_ type: Value.Type, from request: Request, limit: Int, timeout: Duration) async throws -> (Value, Data) {
        let data = try await body(of: request, limit: limit, timeout: timeout)
        guard !data.isEmpty else { throw APIError.invalidJSON("the request needs a JSON object body") }
        do {
            return (try makeDecoder().decode(Value.self, from: data), data)
        } catch let error as DecodingError {
            throw explain(error)
        } catch let error as APIError {
            throw error
        } catch {
            throw APIError.invalidJSON("the body is not valid JSON")
        }
    }

    /// The body, at most `limit` bytes, all of it within `timeout`: a client sending it slowly
    /// holds a request (and its memory) for that long at most, however it paces its bytes.
    static func body(of request: Request, limit: Int, timeout: Duration) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap(Int.init), length > limit {
            throw APIError.bodyTooLarge(limit: limit)
        }
        do {
            let buffer = try await withThrowingTaskGroup(of: ByteBuffer?.self) { group in
                group.addTask { try await request.body.collect(upTo: limit) }
                group.addTask {
                    try await Task.sleep(for: timeout)
                    return nil
                }
                defer { group.cancelAll() }
                // nil: the deadline came first. Cancelling the read ends the request's body stream.
                guard let first = try await group.next(), let buffer = first else {
                    throw APIError.bodyTimeout(timeout)
                }
                return buffer
            }
            return Data(buffer.readableBytesView)
        } catch is NIOTooManyBytesError {
            throw APIError.bodyTooLarge(limit: limit)
        }
    }

    static func explain(_ error: DecodingError) -> APIError {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
                .replacingOccurrences(of: ".[", with: "[")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let name = path(context.codingPath + [key])
            return .invalidRequest("the field '\(name)' is required", field: name)
        case .typeMismatch(_, let context) where context.codingPath.isEmpty:
            return .invalidJSON("the body must be a JSON object (see /openapi.json for its fields)")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            let name = path(context.codingPath)
            return .invalidRequest("the field '\(name)' must be \(describe(type))", field: name)
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            let name = path(context.codingPath)
            return .invalidRequest("the field '\(name)' is invalid: \(context.debugDescription)", field: name)
        case .dataCorrupted:
            return .invalidJSON("the body is not valid JSON")
        @unknown default:
            return .invalidJSON("the body could not be read as the JSON this route takes")
        }
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "a whole number"
        case is Bool.Type: "true or false"
        case is Date.Type: "an ISO 8601 time"
        default: "of another type (see /openapi.json)"
        }
    }
}
