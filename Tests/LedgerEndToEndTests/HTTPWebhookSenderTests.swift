import AsyncHTTPClient
import Foundation
import LedgerApplication
import LedgerRuntime
import LedgerTesting
import Testing

/// What a webhook try's failure reads like in the delivery list, where a support engineer reads it.
@Suite struct HTTPWebhookSenderTests {
    static func request(_ url: String) -> WebhookRequest {
        WebhookRequest(url: url, headers: [("Content-Type", "application/json")], body: #"{"id":"chg_1_0"}"#)
    }

    /// `body` with a client made as the ledger makes it for `configuration`, shut down after.
    static func withClient<T>(_ configuration: HTTPWebhookSender.Configuration, _ body: (HTTPClient) async throws -> T) async throws -> T {
        let client = HTTPWebhookSender.makeHTTPClient(configuration: configuration)
        let result: Result<T, any Error>
        do { result = .success(try await body(client)) } catch { result = .failure(error) }
        try await client.shutdown()
        return try result.get()
    }

    @Test("an answer slower than the try's deadline reads the same whichever timer gives up first")
    func aSlowAnswerReadsTheSameWhicheverTimerGivesUp() async throws {
        let receiver = WebhookReceiver { _ in .init(status: 200, delay: .seconds(10)) }
        try await receiver.run(paths: ["hook"]) { base in
            // The sender's own deadline and the client's read timeout alike (1 s each)...
            let alike = HTTPWebhookSender.Configuration(deadline: .seconds(1))
            try await Self.withClient(alike) { client in
                // ...and a sender whose deadline (2 s) comes after the same client's read timeout (1 s).
                let later = HTTPWebhookSender.Configuration(deadline: .seconds(2))
                for (configuration, words) in [(alike, "no complete answer within 1.0 seconds"), (later, "no complete answer within 2.0 seconds")] {
                    let answer = await HTTPWebhookSender(client: client, configuration: configuration).send(Self.request(base + "/hook"))
                    #expect(answer.statusCode == nil)
                    #expect(answer.error == words)
                    #expect(answer.duration < .seconds(10), "given up before the answer came")
                }
            }
        }
    }

    @Test("an answer whose body is still arriving at the deadline is given up in the same words")
    func aTricklingBodyIsGivenUpAtTheDeadline() async throws {
        let receiver = WebhookReceiver { _ in .init(status: 200, body: String(repeating: "x", count: 40), trickle: .milliseconds(250)) }
        try await receiver.run(paths: ["hook"]) { base in
            let configuration = HTTPWebhookSender.Configuration(deadline: .seconds(2))
            let answer = try await Self.withClient(configuration) { client in
                await HTTPWebhookSender(client: client, configuration: configuration).send(Self.request(base + "/hook"))
            }
            #expect(answer.statusCode == nil, "the head's 200 is no delivery without the whole answer")
            #expect(answer.error == "no complete answer within 2.0 seconds")
            #expect(answer.duration < .seconds(10), "given up before the body's end")
        }
    }

    @Test("an endpoint nobody listens on is a failed try that says so, not a slow answer", arguments: [
        "http://127.0.0.1:1/hook", "http://[::1]:1/hook", "http://localhost:1/hook",
    ])
    func aClosedPortFailsWithItsReason(url: String) async throws {
        let configuration = HTTPWebhookSender.Configuration(deadline: .seconds(2))
        let answer = try await Self.withClient(configuration) { client in
            await HTTPWebhookSender(client: client, configuration: configuration).send(Self.request(url))
        }
        #expect(answer.statusCode == nil)
        #expect(answer.error == "the connection was refused: nothing listens at the URL's host and port")
    }

    @Test("an endpoint that never takes the connection is a try that could not connect")
    func aConnectionNeverTakenCouldNotConnect() async throws {
        let listener = try FullListener()
        defer { listener.close() }
        let configuration = HTTPWebhookSender.Configuration(deadline: .seconds(2))
        let answer = try await Self.withClient(configuration) { client in
            await HTTPWebhookSender(client: client, configuration: configuration).send(Self.request("http://127.0.0.1:\(listener.port)/hook"))
        }
        #expect(answer.statusCode == nil)
        #expect(answer.error == "could not connect: the host did not answer within 1.0 seconds", "each try to connect has half the deadline")
    }
}

/// A socket on 127.0.0.1 that listens with no room and never accepts, its one place taken by a
/// connection of its own: Linux drops every other SYN, so connecting to it times out.
private struct FullListener {
    let port: Int
    private let listening: LoopbackSocket
    private let filler: Int32

    init() throws {
        listening = try LoopbackSocket(listening: 0)
        filler = try listening.connected()
        port = listening.port
    }

    func close() {
        _ = Foundation.close(filler)
        listening.close()
    }
}
