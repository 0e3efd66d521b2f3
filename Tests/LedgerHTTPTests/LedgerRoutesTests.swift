import AppStore
import AppStoreSimulator
import Foundation
import Hummingbird
import HummingbirdTesting
import LedgerApplication
import LedgerDomain
import LedgerHTTP
import LedgerTesting
import NIOCore
import NIOFoundationEssentialsCompat
import Testing

/// The routes as Hummingbird tests routes (`app.test(.router)`), over the in-memory ledger: what
/// a route parses, authorizes, calls and answers, with no database and no socket.
@Suite("The routes over an in-memory ledger")
struct LedgerRoutesTests {
    static let app = "com.example.routes"
    /// A purchase an hour ago.
    static let now = Date().addingTimeInterval(-3_600)

    struct World {
        let ledger: InMemoryLedger
        let authority: SimulatorCertificateAuthority
        let keys: [String: String]
        let application: Application<RouterResponder<LedgerRequestContext>>

        var signer: SimulatorSignedPayloads { SimulatorSignedPayloads(authority: authority) }
    }

    /// A ledger with the app registered, a key per scope and one with them all, a catalog with
    /// coins, and `receipts` known to its App Store.
    static func world(receipts: [String: [TestTransaction]] = [:]) async throws -> World {
        let ledger = InMemoryLedger(logger: quietLogger)
        ledger.directory.addApp(app)
        var keys = ["all": ledger.directory.createKey(app: app, scopes: Set(APIScope.allCases))]
        for scope in APIScope.allCases { keys[scope.rawValue] = ledger.directory.createKey(app: app, scopes: [scope]) }
        keys["other"] = ledger.directory.createKey(app: "com.example.other", scopes: Set(APIScope.allCases))
        _ = try await ledger.commands.defineProduct(try Product(productId: "coins", type: .consumable, prices: ["USD": "0.99"]), app: app,
                                                    metadata: [:])
        let verifier = CannedReceiptVerifier(answers: try receipts.mapValues { (.production, try CannedReceiptVerifier.appReceipt(bundleId: app, $0)) })
        let authority = try SimulatorCertificateAuthority()
        let configuration = LedgerServer.Configuration(
            api: .init(signedPayloads: SignedPayloadVerifier(trustedRoots: [AppleRootCertificates.rootG3, authority.root]))
        )
        let server = LedgerServer(configuration: configuration, services: ledger.services(verifier: verifier), logger: quietLogger)
        return World(ledger: ledger, authority: authority, keys: keys, application: Application(router: server.router()))
    }

    static func json(_ response: TestResponse) -> [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(response.body.readableBytesView))) as? [String: Any] ?? [:]
    }

    static func body(_ object: [String: Any]) throws -> ByteBuffer {
        ByteBuffer(data: try JSONSerialization.data(withJSONObject: object))
    }

    static func headers(key: String?) -> HTTPFields {
        var fields: HTTPFields = [.contentType: "application/json"]
        if let key { fields[.authorization] = "Bearer \(key)" }
        return fields
    }

    @Test("a receipt posted to the route is recorded once, and the user's entitlements are read at its position")
    func receiptThenEntitlements() async throws {
        let world = try await Self.world(receipts: ["cjE=": [.coins("1", quantity: 3)]])
        try await world.application.test(.router) { client in
            let post = ["userId": "alice", "deviceId": "phone", "receiptData": "cjE="]
            var position = 0
            try await client.execute(uri: "/v1/apps/\(Self.app)/receipts", method: .post, headers: Self.headers(key: world.keys["ingest"]),
                                     body: try Self.body(post)) { response in
                #expect(response.status == .ok)
                let answer = Self.json(response)
                #expect((answer["recorded"] as? [[String: Any]])?.compactMap { $0["kind"] as? String } == ["receipt", "purchase"])
                position = answer["position"] as? Int ?? 0
            }
            try await client.execute(uri: "/v1/apps/\(Self.app)/receipts", method: .post, headers: Self.headers(key: world.keys["ingest"]),
                                     body: try Self.body(post)) { response in
                let answer = Self.json(response)
                #expect((answer["recorded"] as? [Any])?.isEmpty == true)
                #expect(answer["position"] as? Int == position, "a repost answers where the purchase is")
            }
            try await client.execute(uri: "/v1/apps/\(Self.app)/users/alice/balances?minPosition=\(position)", method: .get,
                                     headers: Self.headers(key: world.keys["read"])) { response in
                #expect(response.status == .ok)
                let balances = Self.json(response)["balances"] as? [[String: Any]]
                #expect(balances?.first?["balance"] as? Int == 3)
            }
        }
    }

    @Test("keys: none is 401, another app's is 404, one without the route's scope is 403; nothing is recorded")
    func keys() async throws {
        let world = try await Self.world(receipts: ["cjE=": [.coins("1")]])
        let post = try Self.body(["userId": "alice", "deviceId": "phone", "receiptData": "cjE="])
        try await world.application.test(.router) { client in
            for (key, status) in [(nil, HTTPResponse.Status.unauthorized), (world.keys["other"], .notFound), (world.keys["read"], .forbidden)] {
                try await client.execute(uri: "/v1/apps/\(Self.app)/receipts", method: .post, headers: Self.headers(key: key), body: post) { response in
                    #expect(response.status == status)
                }
            }
        }
        #expect(await world.ledger.store.events.count == 1, "the catalog's product only")
    }

    @Test("a receipt Apple refuses answers 422 with its status and records nothing")
    func refusedReceipt() async throws {
        let world = try await Self.world()
        try await world.application.test(.router) { client in
            try await client.execute(uri: "/v1/apps/\(Self.app)/receipts", method: .post, headers: Self.headers(key: world.keys["ingest"]),
                                     body: try Self.body(["userId": "alice", "deviceId": "phone", "receiptData": "bm90IGEgcmVjZWlwdA=="])) { response in
                #expect(response.status == .unprocessableContent)
                let error = Self.json(response)["error"] as? [String: Any]
                #expect(error?["code"] as? String == "invalid_receipt" && error?["status"] as? Int == 21003)
            }
        }
        #expect(await world.ledger.store.events.count == 1)
    }

    @Test("a signed notification nobody holds waits; the post of its transaction copies it to the user; Apple's retry is a duplicate")
    func notificationWaitsForItsUser() async throws {
        let world = try await Self.world(receipts: ["cjI=": [.init("2", "coins", quantity: 2, purchased: Self.now)]])
        // Signed now: the test authority's certificates are valid from the moment it was made.
        let transaction = try world.signer.sign([
            "transactionId": "2", "originalTransactionId": "2", "productId": "coins", "bundleId": Self.app, "quantity": 2,
            "purchaseDate": Self.now.milliseconds, "signedDate": Date().milliseconds,
            "environment": "Production", "type": "Consumable", "inAppOwnershipType": "PURCHASED",
            "revocationDate": Self.now.milliseconds + 60_000, "revocationReason": 0,
        ])
        let notification = try world.signer.sign([
            "notificationType": "REFUND", "notificationUUID": "5a3f0c0e-0000-4000-8000-000000000001", "version": "2.0",
            "signedDate": Date().milliseconds,
            "data": ["bundleId": Self.app, "environment": "Production", "signedTransactionInfo": transaction],
        ])
        try await world.application.test(.router) { client in
            let body = try Self.body(["signedPayload": notification])
            try await client.execute(uri: "/v1/apps/\(Self.app)/notifications", method: .post, headers: Self.headers(key: nil), body: body) { response in
                #expect(response.status == .ok)
                #expect(Self.json(response)["outcome"] as? String == "waiting")
            }
            try await client.execute(uri: "/v1/apps/\(Self.app)/receipts", method: .post, headers: Self.headers(key: world.keys["ingest"]),
                                     body: try Self.body(["userId": "bob", "deviceId": "phone", "receiptData": "cjI="])) { response in
                let kinds = (Self.json(response)["recorded"] as? [[String: Any]])?.compactMap { $0["kind"] as? String } ?? []
                #expect(kinds.contains("notification"), "\(kinds)")
                let balances = (Self.json(response)["entitlements"] as? [String: Any])?["consumables"] as? [[String: Any]]
                #expect(kinds.contains("refund"), "the refund the notification carried: \(kinds)")
                #expect(balances?.isEmpty == true, "the refund took the two coins back: \(Self.json(response))")
            }
            try await client.execute(uri: "/v1/apps/\(Self.app)/notifications", method: .post, headers: Self.headers(key: nil), body: body) { response in
                #expect(Self.json(response)["outcome"] as? String == "duplicate")
                #expect(Self.json(response)["userId"] as? String == nil, "recorded first on the app's stream, where Apple's retry finds it")
            }
        }
    }

    @Test("the audit routes of a ledger whose audit trail is not built answer 503 projections_behind")
    func auditNotBuilt() async throws {
        let world = try await Self.world()
        try await world.application.test(.router) { client in
            try await client.execute(uri: "/v1/audit/events", method: .get, headers: Self.headers(key: world.keys["finance"])) { response in
                #expect(response.status == .serviceUnavailable)
                #expect((Self.json(response)["error"] as? [String: Any])?["code"] as? String == "projections_behind")
            }
        }
    }
}
