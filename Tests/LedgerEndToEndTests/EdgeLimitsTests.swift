import AppStore
import Foundation
import LedgerHTTP
import LedgerStore
import LedgerTesting
import NIOHTTP1
import PostgresNIO
import Testing

/// What a slow, silent, numerous or unauthenticated client can cost the ledger: bounded, and
/// answered in words. Waits are generous bounds for a loaded machine, never speed claims.
@Suite struct EdgeLimitsTests {
    static let receiptsPath = "/v1/apps/\(APIHarness.app)/receipts"

    /// Events and kept receipts of the harness's database.
    static func recorded(_ api: APIHarness) async throws -> (events: Int64, receipts: Int64) {
        let rows = try await api.client.query(
            "SELECT (SELECT count(*) FROM ledger.events), (SELECT count(*) FROM ledger.receipts)", logger: APIHarness.logger
        ).collect()
        return try #require(rows.first).decode((Int64, Int64).self)
    }

    @Test func aConnectionThatSendsNothingIsClosedAfterTheIdleTimeout() async throws {
        let server = LedgerServer.Configuration(host: "127.0.0.1", port: 0, idleTimeout: .milliseconds(300))
        try await APIHarness.run(server: server) { api in
            let silent = try RawConnection(base: api.base)
            let started = ContinuousClock.now
            let (text, closed) = await silent.receiveUntilClosed(timeout: .seconds(20))
            #expect(closed, "the server kept a silent connection open")
            #expect(text.isEmpty)
            #expect(ContinuousClock.now - started >= .milliseconds(250))

            // Half a request head is as silent as nothing.
            let halfHead = try RawConnection(base: api.base)
            try halfHead.send("GET /health HTTP/1.1\r\nHost: ledger\r\n")
            #expect(await halfHead.receiveUntilClosed(timeout: .seconds(20)).closed)

            // Connections that do send are answered as before. On a connection of its own: one the
            // HTTP client pooled before the test may have just been closed as idle (a reset, once in CI).
            // The idle clock runs from the connection's accept: on a machine so loaded that the request
            // leaves more than 300 ms after the connect, the server rightly closes it first, answering
            // nothing (seen once in CI). Only that outcome is tried again, twice at most.
            var answer = ""
            for _ in 0..<3 {
                let speaking = try RawConnection(base: api.base)
                try speaking.send("GET /health HTTP/1.1\r\nHost: ledger\r\nConnection: close\r\n\r\n")
                answer = await speaking.receiveUntilClosed(timeout: .seconds(20)).text
                if !answer.isEmpty { break }
            }
            #expect(answer.hasPrefix("HTTP/1.1 200"), "\(answer.prefix(200))")
        }
    }

    @Test func aVerifyWhoseAnswerTricklesPastTheDeadlineIsARetryableTimeoutAndRecordsNothing() async throws {
        // A deadline a loaded machine still meets for a normal answer, far below the trickle's 60 s.
        try await APIHarness.run(appStoreTimeout: .seconds(4)) { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let bought = try await api.buy("alice", "coins.100")
            let before = try await Self.recorded(api)

            // The App Store answers at once, then sends its body over 60 s.
            let faults = try await api.simulator(.PUT, "/admin/faults", ["trickleMilliseconds": 60_000])
            #expect(faults.status == 200, "\(faults.text)")
            let started = ContinuousClock.now
            let answer = try await api.ingest("alice", device: "phone", receipt: bought.receipt)
            #expect(answer.status == 503, "\(answer.text)")
            #expect(answer.errorCode == "appstore_unavailable")
            #expect((answer.json["error"] as? [String: Any])?["retryable"] as? Bool == true)
            #expect(answer.errorMessage?.contains("timed out") == true, "\(answer.errorMessage ?? "")")
            #expect(answer.headers.first(name: "Retry-After") != nil)
            #expect(ContinuousClock.now - started < .seconds(40), "cut off by the deadline, not by the end of the body")
            let after = try await Self.recorded(api)
            #expect(after.events == before.events && after.receipts == before.receipts, "nothing recorded")

            // Sent again once the App Store answers normally, it is recorded.
            _ = try await api.simulator(.DELETE, "/admin/faults")
            #expect(try await api.ingest("alice", device: "phone", receipt: bought.receipt).status == 200)
        }
    }

    @Test func requestsBeyondTheCapAreAnswered503WithRetryAfterAtOnce() async throws {
        let server = LedgerServer.Configuration(
            host: "127.0.0.1", port: 0, api: .init(bodyReadTimeout: .seconds(120)), maximumRequestsInFlight: 2
        )
        try await APIHarness.run(server: server) { api in
            // Three requests whose bodies never finish arriving: two hold the two places in flight
            // (for as long as their bodies are awaited), the third is refused, whichever comes last.
            var holders: [RawConnection] = []
            for _ in 0..<3 {
                let holder = try RawConnection(base: api.base)
                try holder.send("""
                    POST /v1/apps/\(APIHarness.app)/users/alice/consumptions HTTP/1.1\r
                    Host: ledger\r
                    Authorization: Bearer \(api.allKey)\r
                    Content-Type: application/json\r
                    Content-Length: 100\r
                    \r
                    {"productId":
                    """)
                holders.append(holder)
            }
            var refused: (index: Int, text: String)?
            let deadline = ContinuousClock.now + .seconds(30)
            while refused == nil, ContinuousClock.now < deadline {
                for (index, holder) in holders.enumerated() {
                    let (text, closed) = await holder.receiveUntilClosed(timeout: .milliseconds(100))
                    guard !text.isEmpty || closed else { continue }
                    refused = (index, closed ? text : text + (await holder.receiveUntilClosed(timeout: .seconds(20))).text)
                    break
                }
            }
            let (index, text) = try #require(refused, "none of three requests was refused with a cap of 2")
            #expect(text.hasPrefix("HTTP/1.1 503"), "\(text.prefix(300))")
            #expect(text.contains("\"code\":\"overloaded\"") && text.contains("\"retryable\":true"), "\(text)")
            #expect(text.lowercased().contains("retry-after: 1\r\n"))
            #expect(text.contains("as many as it takes at once"))
            holders.remove(at: index).close()

            // While the two are in flight, any API request is refused at once; health still answers.
            let path = "/v1/apps/\(APIHarness.app)/users/alice/balances"
            let busy = try await api.send(.GET, path, key: api.allKey)
            #expect(busy.status == 503 && busy.errorCode == "overloaded", "\(busy.text)")
            #expect(busy.headers.first(name: "Retry-After") == "1")
            #expect(try await api.send(.GET, "/health", key: nil).status == 200)

            // Once they are gone, requests are taken again.
            for holder in holders { holder.close() }
            #expect(try await eventually { try await api.send(.GET, path, key: api.allKey).status != 503 })
        }
    }

    @Test func anUnauthenticatedPostWithALargeBodyIsAnswered401BeforeItsBodyIsRead() async throws {
        try await APIHarness.run { api in
            for authorization in ["", "Authorization: Bearer lk_0123456789abcdef_not-a-key\r\n", "Authorization: Bearer nonsense\r\n"] {
                let client = try RawConnection(base: api.base)
                // 100 MB announced, one kilobyte sent: the answer must not wait for the rest.
                try client.send("""
                    POST \(Self.receiptsPath) HTTP/1.1\r
                    Host: ledger\r
                    \(authorization)Content-Type: application/json\r
                    Content-Length: 104857600\r
                    \r

                    """)
                try client.send(Data(repeating: UInt8(ascii: " "), count: 1_024))
                let (text, closed) = await client.receiveUntilClosed(timeout: .seconds(20))
                #expect(text.hasPrefix("HTTP/1.1 401"), "\(authorization): \(text.prefix(200))")
                #expect(text.contains("\"code\":\"unauthorized\""))
                #expect(text.lowercased().contains("connection: close"))
                #expect(closed, "the connection ends rather than reading 100 MB nobody asked for")
                client.close()
            }
            // A refusal that comes after the body was read keeps the connection.
            let afterBody = try await api.send(.POST, "/v1/apps/\(APIHarness.app)/users/nobody/consumptions", key: api.allKey,
                                               json: ["productId": "coins.100", "quantity": 1, "deviceId": "phone"])
            #expect(afterBody.status == 404 && afterBody.errorCode == "unknown_user", "\(afterBody.text)")
            #expect(afterBody.headers.first(name: "Connection") == nil)
        }
    }

    @Test func aBodyThatDoesNotArriveInTimeIsAnswered408AndRecordsNothing() async throws {
        let server = LedgerServer.Configuration(host: "127.0.0.1", port: 0, api: .init(bodyReadTimeout: .milliseconds(500)))
        try await APIHarness.run(server: server) { api in
            try await api.defineProduct("coins.100", type: "consumable")
            let before = try await Self.recorded(api)
            let client = try RawConnection(base: api.base)
            try client.send("""
                POST /v1/apps/\(APIHarness.app)/users/alice/consumptions HTTP/1.1\r
                Host: ledger\r
                Authorization: Bearer \(api.allKey)\r
                Content-Type: application/json\r
                Content-Length: 100\r
                \r
                {"productId":"coins.100",
                """)
            let (text, closed) = await client.receiveUntilClosed(timeout: .seconds(20))
            #expect(text.hasPrefix("HTTP/1.1 408"), "\(text.prefix(200))")
            #expect(text.contains("\"code\":\"body_timeout\""))
            #expect(closed)
            let after = try await Self.recorded(api)
            #expect(after.events == before.events)
        }
    }
}
