import Foundation
import Hummingbird
import HummingbirdTesting
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerProjections
import LedgerStore
import LedgerTesting
import Testing

@Suite("The OpenAPI document")
struct OpenAPITests {
    static let methods: Set<String> = ["get", "put", "post", "delete", "patch", "head", "options", "trace"]

    /// The bundled document, as the controller serves it.
    func document() throws -> [String: Any] {
        let data = Data(OpenAPIController.document.readableBytesView)
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Every operation: (method, path, operation object).
    func operations() throws -> [(method: String, path: String, operation: [String: Any])] {
        let paths = try #require(try document()["paths"] as? [String: [String: Any]])
        return paths.flatMap { path, item in
            item.compactMap { key, value -> (String, String, [String: Any])? in
                guard Self.methods.contains(key), let operation = value as? [String: Any] else { return nil }
                return (key, path, operation)
            }
        }
    }

    /// Resolves a local `$ref` (`#/components/...`), or returns the object itself.
    func resolve(_ object: [String: Any]) throws -> [String: Any] {
        guard let reference = object["$ref"] as? String else { return object }
        var current: Any = try document()
        for part in reference.dropFirst(2).split(separator: "/") {
            current = try #require((current as? [String: Any])?[String(part)], "unresolvable \(reference)")
        }
        return try #require(current as? [String: Any])
    }

    @Test("documents exactly the routes the server has")
    func documentsEveryRoute() throws {
        let documented = Set(try operations().map { "\($0.method.uppercased()) \($0.path)" })
        let served = Set(APIRoutes.all.map { "\($0.method.rawValue) \($0.path)" })
        #expect(documented == served, "missing: \(served.subtracting(documented).sorted()), extra: \(documented.subtracting(served).sorted())")
        #expect(try document()["openapi"] as? String == "3.1.0")
    }

    @Test("every operation has an id, a summary, its success status, 400, and 401/403 with its scope when scoped")
    func documentsStatusesAndScopes() throws {
        let routes = Dictionary(uniqueKeysWithValues: APIRoutes.all.map { ("\($0.method.rawValue) \($0.path)", $0) })
        var ids = Set<String>()
        for (method, path, operation) in try operations() {
            let route = try #require(routes["\(method.uppercased()) \(path)"])
            let id = try #require(operation["operationId"] as? String, "\(route) has no operationId")
            #expect(ids.insert(id).inserted, "operationId \(id) is used twice")
            #expect(!(operation["summary"] as? String ?? "").isEmpty, "\(route) has no summary")
            let responses = try #require(operation["responses"] as? [String: Any])
            #expect(responses["400"] != nil, "\(route) does not document 400")
            #expect(responses.keys.contains { $0.hasPrefix("2") }, "\(route) documents no success status")
            let security = operation["security"] as? [[String: [String]]]
            if let scope = route.scope {
                #expect(responses["401"] != nil, "\(route) does not document 401")
                #expect(responses["403"] != nil, "\(route) does not document 403")
                #expect(operation["x-scope"] as? String == scope.rawValue, "\(route) x-scope")
                #expect(security?.first?["bearerAuth"] == [scope.rawValue], "\(route) security")
                #expect((operation["description"] as? String ?? "").contains("`\(scope.rawValue)`"), "\(route) description names the scope")
            } else if route.anyKey {
                #expect(operation["x-scope"] == nil)
                #expect(responses["401"] != nil, "\(route) does not document 401")
                #expect(security?.first?["bearerAuth"] == [], "\(route) takes a key of any scope")
            } else if route.path == "/metrics" {
                // Not an API key: the operator's metrics token.
                #expect(security?.first?["metricsToken"] == [], "\(route) takes the metrics token")
                #expect(responses["401"] != nil && responses["403"] != nil, "\(route) documents its refusals")
            } else {
                #expect(operation["x-scope"] == nil)
                #expect(security?.isEmpty == true, "\(route) needs no key")
            }
            for (status, response) in responses {
                let response = try resolve(try #require(response as? [String: Any]))
                #expect(!(response["description"] as? String ?? "").isEmpty, "\(route) \(status) has no description")
                // /health answers 503 with its own report, which says what is down.
                if let status = Int(status), status >= 400, route.path != "/health" {
                    let content = try #require(response["content"] as? [String: Any], "\(route) \(status) has no body")
                    let schema = (content["application/json"] as? [String: Any])?["schema"] as? [String: Any]
                    #expect(schema?["$ref"] as? String == "#/components/schemas/Error", "\(route) \(status) is not an Error")
                }
            }
        }
    }

    @Test("the success statuses are the contract's: 201 for failures and consumptions, 304 for products")
    func documentsContractStatuses() throws {
        let statuses = Dictionary(uniqueKeysWithValues: try operations().map {
            ("\($0.method.uppercased()) \($0.path)", Set(($0.operation["responses"] as? [String: Any] ?? [:]).keys))
        })
        #expect(statuses["POST /v1/apps/{bundleId}/failures"]?.contains("201") == true)
        #expect(statuses["POST /v1/apps/{bundleId}/users/{userId}/consumptions"]?.contains("201") == true)
        #expect(statuses["GET /v1/apps/{bundleId}/products"]?.isSuperset(of: ["200", "304"]) == true)
        #expect(statuses["POST /v1/apps/{bundleId}/receipts"]?.isSuperset(of: ["200", "409", "422", "503"]) == true)
    }

    @Test("every path parameter of a template is declared, required, and limited to 255 characters")
    func declaresPathParameters() throws {
        for (method, path, operation) in try operations() {
            let inTemplate = Set(path.split(separator: "/").filter { $0.hasPrefix("{") }.map { String($0.dropFirst().dropLast()) })
            let parameters = try (operation["parameters"] as? [[String: Any]] ?? []).map(resolve)
            let declared = parameters.filter { $0["in"] as? String == "path" }
            #expect(Set(declared.compactMap { $0["name"] as? String }) == inTemplate, "\(method) \(path)")
            for parameter in declared {
                #expect(parameter["required"] as? Bool == true)
                #expect((parameter["schema"] as? [String: Any])?["maxLength"] as? Int == 255)
            }
        }
    }

    @Test("request bodies name their required fields and limits; receipts take at most 1 MiB")
    func describesRequestBodies() throws {
        let bodies = try operations().compactMap { method, path, operation -> (String, [String: Any])? in
            guard let body = operation["requestBody"] as? [String: Any] else { return nil }
            let content = try #require(body["content"] as? [String: Any])
            let schema = try #require((content["application/json"] as? [String: Any])?["schema"] as? [String: Any])
            return ("\(method.uppercased()) \(path)", try resolve(schema))
        }
        // PUT product, receipts, signed transactions, notifications, finish, failures, revoke,
        // consumptions, consumption consent, a period's close and reopening, a webhook endpoint and a resend; restore has no body.
        #expect(bodies.count == 13)
        for (route, field) in [("POST /v1/apps/{bundleId}/transactions", "signedTransaction"), ("POST /v1/apps/{bundleId}/notifications", "signedPayload")] {
            let schema = try #require(bodies.first { $0.0 == route }?.1)
            #expect((schema["required"] as? [String] ?? []).contains(field), "\(route)")
            #expect((schema["properties"] as? [String: [String: Any]])?[field]?["maxLength"] as? Int == APILimits.signedPayloadCharacters, "\(route)")
        }
        let receipt = try #require(bodies.first { $0.0 == "POST /v1/apps/{bundleId}/receipts" }?.1)
        #expect(Set(receipt["required"] as? [String] ?? []) == ["userId", "deviceId", "receiptData"])
        let properties = try #require(receipt["properties"] as? [String: [String: Any]])
        #expect(properties["receiptData"]?["maxLength"] as? Int == 1_048_576)
        #expect(properties["userId"]?["maxLength"] as? Int == 255)
        let consumption = try #require(bodies.first { $0.0 == "POST /v1/apps/{bundleId}/users/{userId}/consumptions" }?.1)
        #expect(Set(consumption["required"] as? [String] ?? []) == ["productId", "quantity", "deviceId"])
    }

    @Test("audit events come as JSON or CSV, metrics as Prometheus text")
    func documentsContentTypes() throws {
        let operations = try operations()
        func contentTypes(_ path: String) throws -> Set<String> {
            let operation = try #require(operations.first { $0.path == path }?.operation)
            let ok = try #require((operation["responses"] as? [String: Any])?["200"] as? [String: Any])
            return Set((try resolve(ok)["content"] as? [String: Any] ?? [:]).keys)
        }
        #expect(try contentTypes("/v1/audit/events") == ["application/json", "text/csv"])
        #expect(try contentTypes("/metrics").allSatisfy { $0.hasPrefix("text/plain") })
    }

    @Test("GET /openapi.json serves the document as JSON")
    func servesTheDocument() async throws {
        let router = Router()
        OpenAPIController().addRoutes(to: router)
        try await Application(router: router).test(.router) { client in
            try await client.execute(uri: "/openapi.json", method: .get) { response in
                #expect(response.status == .ok)
                #expect(response.headers[.contentType]?.hasPrefix("application/json") == true)
                let served = try JSONSerialization.jsonObject(with: Data(response.body.readableBytesView)) as? [String: Any]
                #expect(served?["paths"] as? [String: Any] != nil)
            }
        }
    }

    // MARK: The document is the source of truth for the audit vocabulary

    /// The `enum` of a component parameter (or of its array items).
    func parameterEnum(_ name: String) throws -> [String] {
        let parameters = try #require((try document()["components"] as? [String: Any])?["parameters"] as? [String: Any])
        let schema = try #require((parameters[name] as? [String: Any])?["schema"] as? [String: Any], "no parameter \(name)")
        let values = (schema["enum"] ?? (schema["items"] as? [String: Any])?["enum"]) as? [String]
        return try #require(values, "parameter \(name) names no values")
    }

    /// The `enum` of a property of a component schema.
    func propertyEnum(_ schema: String, _ property: String) throws -> [String] {
        let schemas = try #require((try document()["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let properties = try #require((schemas[schema] as? [String: Any])?["properties"] as? [String: Any], "no schema \(schema)")
        return try #require((properties[property] as? [String: Any])?["enum"] as? [String], "\(schema).\(property) names no values")
    }

    @Test("every audit value the document names is one the server accepts, and it names every one the server accepts")
    func auditParametersMatchTheServer() throws {
        let types = try parameterEnum("type")
        #expect(Set(types) == Set(AuditEventKind.allCases.map(\.rawValue)))
        for type in types { #expect(try AuditEventKind.parse(list: type).map(\.rawValue) == [type]) }
        #expect(try AuditEventKind.parse(list: types.joined(separator: ",")).count == types.count, "the comma-separated form")

        let environments = try parameterEnum("environment")
        #expect(Set(environments) == Set(AuditEnvironment.allCases.map(\.rawValue)))
        for environment in environments { #expect(try AuditFilter.environment(named: environment).rawValue == environment) }

        let groupings = try parameterEnum("groupBy")
        #expect(Set(groupings) == Set(AuditGrouping.allCases.map(\.rawValue)))
        for grouping in groupings { #expect(try AuditGrouping.parse(list: grouping).map(\.rawValue) == [grouping]) }

        for parameter in ["from", "to"] {
            let parameters = try #require((try document()["components"] as? [String: Any])?["parameters"] as? [String: Any])
            let description = (parameters[parameter] as? [String: Any])?["description"] as? String ?? ""
            #expect(description.contains("occurred_at"), "\(parameter) filters on occurred_at, as the server does: \(description)")
        }
    }

    @Test("every value the server writes in an audit row is one the document names")
    func auditRowValuesAreDocumented() throws {
        #expect(Set(try propertyEnum("AuditRow", "event")) == Set(AuditEventKind.allCases.map(\.rawValue)))
        #expect(Set(try propertyEnum("AuditRow", "environment")) == Set(StoreEnvironment.allCases.map(\.rawValue)))
        #expect(Set(try propertyEnum("AuditSummary", "environment")) == Set(AuditEnvironment.allCases.map(\.rawValue)))
    }
}
