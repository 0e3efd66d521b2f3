@testable import AppStore
import Crypto
import Foundation
import Hummingbird
import LedgerDomain
import LedgerRuntime
import LedgerTesting
import Synchronization
import Testing

/// The App Store Server API client against a real HTTP server that misbehaves: a slow body, a
/// redirect, a 429 with Apple's `Retry-After`.
@Suite struct AppStoreServerAPIClientTests {
    /// What the test server did, request by request.
    final class Calls: Sendable {
        let paths = Mutex<[String]>([])
        func add(_ path: String) { paths.withLock { $0.append(path) } }
        var count: Int { paths.withLock { $0.count } }
    }

    static func key() throws -> AppStoreServerAPIKey {
        try AppStoreServerAPIKey(keyID: "KEY1", issuerID: "issuer-1", privateKeyPEM: P256Key.pem())
    }

    /// Runs `body` with a client of the API `routes` serve.
    static func withAPI<T: Sendable>(
        timeout: Duration, _ routes: @escaping @Sendable (Router<BasicRequestContext>, Calls) -> Void,
        _ body: (AppStoreServerAPI, Calls) async throws -> T
    ) async throws -> T {
        let calls = Calls()
        let router = Router()
        routes(router, calls)
        let reporter = ServerPort()
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                              onServerRunning: { reporter.report($0.localAddress?.port ?? 0) }, logger: quietLogger)
        return try await withRunningServices([app], logger: quietLogger, onExit: reporter.stopped) {
            let base = "http://127.0.0.1:\(try await reporter.value())"
            let api = AppStoreServerAPI(configuration: .init(productionURL: base, sandboxURL: base, timeout: timeout),
                                        verifier: SignedPayloadVerifier(), gate: RateGate())
            return try await body(api, calls)
        }
    }

    @Test func aSlowBodyEndsAtTheHistorysDeadline() async throws {
        try await Self.withAPI(timeout: .seconds(1)) { router, calls in
            router.get("/inApps/v2/history/:id") { _, _ -> Response in
                calls.add("history")
                // The head at once, then the body a byte every second.
                return Response(status: .ok, headers: [.contentType: "application/json"], body: .init { writer in
                    for byte in Array(#"{"hasMore":false,"signedTransactions":[]}"#.utf8) {
                        try await Task.sleep(for: .seconds(1))
                        try await writer.write(ByteBuffer(bytes: [byte]))
                    }
                    try await writer.finish(nil)
                })
            }
        } _: { api, _ in
            let started = ContinuousClock.now
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await api.history(of: "1000", bundleId: "com.example.app", environment: .sandbox, key: try Self.key())
            }
            #expect(ContinuousClock.now - started < .seconds(5), "the deadline, not the body's 40 s")
            if case .unavailable(let reason) = error { #expect(reason.contains("deadline"), "\(reason)") } else { Issue.record("\(String(describing: error))") }
        }
    }

    @Test func aRedirectIsNotFollowedAndTheTokenGoesNowhereElse() async throws {
        try await Self.withAPI(timeout: .seconds(5)) { router, calls in
            router.get("/inApps/v2/history/:id") { _, _ -> Response in
                calls.add("history")
                return Response(status: .found, headers: [.location: "/elsewhere"])
            }
            router.get("/elsewhere") { _, _ -> Response in
                calls.add("elsewhere")
                return Response(status: .ok)
            }
        } _: { api, calls in
            let error = await #expect(throws: AppStoreServerAPIError.self) {
                _ = try await api.history(of: "1000", bundleId: "com.example.app", environment: .sandbox, key: try Self.key())
            }
            if case .malformed(let reason) = error { #expect(reason.contains("redirect"), "\(reason)") } else { Issue.record("\(String(describing: error))") }
            #expect(calls.paths.withLock { $0 } == ["history"])
        }
    }

    @Test func a429HoldsTheAppBackUntilApplesRetryAfter() async throws {
        let until = Date().addingTimeInterval(120)
        try await Self.withAPI(timeout: .seconds(5)) { router, calls in
            router.get("/inApps/v2/history/:id") { _, _ -> Response in
                calls.add("history")
                return Response(status: .tooManyRequests, headers: [.retryAfter: String(until.milliseconds)])
            }
        } _: { api, calls in
            for _ in 0..<3 {
                let error = await #expect(throws: AppStoreServerAPIError.self) {
                    _ = try await api.history(of: "1000", bundleId: "com.example.app", environment: .sandbox, key: try Self.key())
                }
                guard case .rateLimited(let said)? = error else { Issue.record("\(String(describing: error))"); continue }
                #expect(abs((said ?? .distantPast).timeIntervalSince(until)) < 1, "Apple's time, in milliseconds since 1970")
            }
            #expect(calls.count == 1, "asked once; then held back until Apple's time")
        }
        #expect(AppStoreServerAPI.retryAfter("30", now: Date(timeIntervalSince1970: 0)) == Date(timeIntervalSince1970: 30), "delta-seconds too")
        #expect(AppStoreServerAPI.retryAfter("soon", now: Date()) == nil)
    }
}

/// A P-256 private key as App Store Connect's `.p8` holds it.
enum P256Key {
    static func pem() -> String {
        P256.Signing.PrivateKey().pemRepresentation
    }
}
