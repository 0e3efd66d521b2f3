import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Where the demo talks to: the ledger's API (with one API key of the app) and the App Store
/// simulator's admin API. Nothing else: the demo goes through HTTP only, as an app's server would.
public struct DemoClient: Sendable {
    /// Such as `http://127.0.0.1:8080`.
    public let ledgerBase: String
    /// A key of `bundleId` with the ingest, read, finance and admin scopes.
    public let apiKey: String
    /// Such as `http://127.0.0.1:8090`.
    public let simulatorBase: String
    public let bundleId: String
    let http: HTTPClient

    public init(ledgerBase: String, apiKey: String, simulatorBase: String, bundleId: String, http: HTTPClient = .shared) {
        self.ledgerBase = ledgerBase
        self.apiKey = apiKey
        self.simulatorBase = simulatorBase
        self.bundleId = bundleId
        self.http = http
    }

    /// One request to the ledger, authorized with the key.
    func ledger(_ method: HTTPMethod, _ path: String, _ body: DemoJSON? = nil, headers: [(String, String)] = []) async throws -> DemoAnswer {
        try await send(method, ledgerBase + path, body, headers: [("Authorization", "Bearer \(apiKey)")] + headers)
    }

    /// One request to the simulator's admin API.
    func simulator(_ method: HTTPMethod, _ path: String, _ body: DemoJSON? = nil) async throws -> DemoAnswer {
        try await send(method, simulatorBase + path, body, headers: [])
    }

    private func send(_ method: HTTPMethod, _ url: String, _ body: DemoJSON?, headers: [(String, String)]) async throws -> DemoAnswer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(bytes: body.data))
        }
        let response: HTTPClientResponse
        do {
            response = try await http.execute(request, timeout: .seconds(30))
        } catch {
            throw DemoError(message: "\(method.rawValue) \(url) got no answer (\(error)); is the server running?")
        }
        let bytes = try await response.body.collect(upTo: 16 * 1024 * 1024)
        let data = Data(bytes.readableBytesView)
        return DemoAnswer(status: Int(response.status.code), body: DemoJSON(data: data), headers: response.headers)
    }
}

extension DemoClient {
    /// Creates (or updates) the app in the simulator with the shared secret the ledger is given too.
    public static func createSimulatorApp(simulatorBase: String, bundleId: String, sharedSecret: String, http: HTTPClient = .shared) async throws {
        let client = DemoClient(ledgerBase: "", apiKey: "", simulatorBase: simulatorBase, bundleId: bundleId, http: http)
        let answer = try await client.simulator(.PUT, "/admin/apps/\(bundleId)", ["sharedSecret": .string(sharedSecret)])
        guard answer.status == 200 else {
            throw DemoError(message: "the simulator refused app \(bundleId): \(answer.status) \(answer.body)")
        }
    }
}
