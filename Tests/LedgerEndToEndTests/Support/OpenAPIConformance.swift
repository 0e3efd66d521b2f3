import Foundation
import Hummingbird
import LedgerHTTP
import NIOCore

/// Checks real answers against `/openapi.json`: the document must list the status an answer had,
/// and a JSON body must fit the schema documented for it. The harness runs every answer of the
/// end-to-end tests through this, so the document cannot drift from what the server does.
enum OpenAPIConformance {
    // Read-only after its one initialisation.
    nonisolated(unsafe) static let document: [String: Any] = {
        let data = Data(OpenAPIController.document.readableBytesView)
        return (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
    }()

    /// The problems with an answer to `method path` (a concrete path, query included), empty when it conforms.
    static func problems(method: String, path: String, status: Int, contentType: String?, body: Data) -> [String] {
        let bare = String(path.split(separator: "?", maxSplits: 1).first ?? "")
        guard let route = APIRoutes.all.first(where: { $0.method.rawValue == method && matches(template: $0.path, bare) }) else {
            return []  // not a route of the API (an unknown path answering 404 is checked by the tests themselves)
        }
        guard let operation = (document["paths"] as? [String: Any]).flatMap({ $0[route.path] as? [String: Any] })?[method.lowercased()] as? [String: Any],
              let responses = operation["responses"] as? [String: Any]
        else { return ["\(route) is not in the document"] }
        guard let documented = responses[String(status)] as? [String: Any] else {
            return ["\(route) answered \(status), which the document does not list (it lists \(responses.keys.sorted()))"]
        }
        let response = resolve(documented)
        guard let contentType, contentType.hasPrefix("application/json"), !body.isEmpty else { return [] }
        guard let schema = ((response["content"] as? [String: Any])?["application/json"] as? [String: Any])?["schema"] as? [String: Any] else {
            return ["\(route) \(status) answered JSON the document does not describe"]
        }
        guard let value = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]) else { return ["\(route) \(status): body is not JSON"] }
        return validate(value, against: schema, at: "\(route) \(status) $")
    }

    static func matches(template: String, _ path: String) -> Bool {
        let a = template.split(separator: "/"), b = path.split(separator: "/")
        return a.count == b.count && zip(a, b).allSatisfy { $0.hasPrefix("{") || $0 == $1 }
    }

    static func resolve(_ object: [String: Any]) -> [String: Any] {
        guard let reference = object["$ref"] as? String else { return object }
        var current: Any = document
        for part in reference.dropFirst(2).split(separator: "/") { current = (current as? [String: Any])?[String(part)] as Any }
        return resolve(current as? [String: Any] ?? [:])
    }

    /// A small JSON Schema check: type, properties, required, additionalProperties, items, enum.
    /// Stricter than JSON Schema on one point: an object schema with properties takes no other
    /// key, so a field the server sends and the document does not describe is found.
    static func validate(_ value: Any, against schemaObject: [String: Any], at path: String) -> [String] {
        let schema = resolve(schemaObject)
        if let options = (schema["oneOf"] ?? schema["anyOf"]) as? [[String: Any]] {
            return options.contains { validate(value, against: $0, at: path).isEmpty } ? [] : ["\(path): fits none of its alternatives"]
        }
        var problems: [String] = []
        let types: [String] = (schema["type"] as? String).map { [$0] } ?? (schema["type"] as? [String]) ?? []
        if !types.isEmpty && !types.contains(where: { fits(value, $0) }) {
            return ["\(path): \(String(describing: value).prefix(60)) is not \(types.joined(separator: " or "))"]
        }
        if let allowed = schema["enum"] as? [Any], !allowed.contains(where: { "\($0)" == "\(value)" }) {
            problems.append("\(path): \(value) is not one of \(allowed)")
        }
        if let object = value as? [String: Any] {
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for name in schema["required"] as? [String] ?? [] where object[name] == nil {
                problems.append("\(path).\(name): required but missing")
            }
            for (name, member) in object {
                if let propertySchema = properties[name] as? [String: Any] {
                    problems += validate(member, against: propertySchema, at: "\(path).\(name)")
                } else if let additional = schema["additionalProperties"] as? [String: Any] {
                    problems += validate(member, against: additional, at: "\(path).\(name)")
                } else if schema["additionalProperties"] as? Bool != true || !properties.isEmpty {
                    // Every field the server sends is described: an object with properties is closed
                    // (only a map, `additionalProperties: true` with no properties, takes any key).
                    problems.append("\(path).\(name): sent, but not in the document")
                }
            }
        }
        if let array = value as? [Any], let items = schema["items"] as? [String: Any] {
            for (index, element) in array.enumerated() { problems += validate(element, against: items, at: "\(path)[\(index)]") }
        }
        return problems
    }

    /// Foundation on Linux hands booleans and numbers back alike as NSNumber, so these two are not told apart.
    private static func fits(_ value: Any, _ type: String) -> Bool {
        switch type {
        case "null": return value is NSNull
        case "object": return value is [String: Any]
        case "array": return value is [Any]
        case "string": return value is String
        case "boolean": return value is Bool || value is NSNumber
        case "integer": return (value as? NSNumber).map { $0.doubleValue.rounded() == $0.doubleValue } ?? false
        case "number": return value is NSNumber
        default: return true
        }
    }
}
