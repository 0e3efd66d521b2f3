import Foundation
import LedgerApplication
import LedgerTesting
import NIOHTTP1
import Testing

/// An app's admin key manages its webhook endpoints over HTTP; other keys and other apps' ids are refused.
@Suite struct WebhookRoutesTests {
    static let app = APIHarness.app

    @Test func anAdminKeyAddsListsResendsAndRemovesItsAppsEndpoints() async throws {
        try await APIHarness.run { api in
            let admin = api.keys["admin"]
            let path = "/v1/apps/\(Self.app)/webhooks"
            let added = try await api.send(.POST, path, key: admin, json: ["url": "https://example.com/hooks", "types": ["renewal", "purchase"]])
            #expect(added.status == 201, "\(added.text)")
            let id = try #require(added.json["id"] as? String)
            #expect((added.json["secret"] as? String)?.hasPrefix("whsec_") == true)
            #expect(added.json["types"] as? [String] == ["purchase", "renewal"])

            let listed = try await api.send(.GET, path, key: admin)
            let endpoints = listed.json["endpoints"] as? [[String: Any]] ?? []
            #expect(endpoints.map { $0["id"] as? String } == [id] && endpoints.first?["secret"] == nil, "\(listed.text)")

            let deliveries = try await api.send(.GET, "\(path)/\(id)/deliveries?failed=true&limit=10", key: admin)
            #expect(deliveries.status == 200 && (deliveries.json["deliveries"] as? [Any])?.isEmpty == true, "\(deliveries.text)")
            let resent = try await api.send(.POST, "\(path)/\(id)/resend", key: admin, json: ["after": 0])
            #expect(resent.status == 200 && resent.json["resent"] as? Int == 0, "\(resent.text)")
            let unknownChange = try await api.send(.POST, "\(path)/\(id)/resend", key: admin, json: ["changeId": "chg_5_0"])
            #expect(unknownChange.status == 404 && unknownChange.errorCode == "unknown_change", "\(unknownChange.text)")
            let neither = try await api.send(.POST, "\(path)/\(id)/resend", key: admin, json: [String: Any]())
            #expect(neither.status == 400, "\(neither.text)")

            let plain = try await api.send(.POST, path, key: admin, json: ["url": "http://example.com/hooks"])
            #expect(plain.status == 400 && plain.errorMessage?.contains("use https://") == true, "\(plain.text)")
            let reader = try await api.send(.GET, path, key: api.keys["read"])
            #expect(reader.status == 403)
            let otherApp = try await api.send(.GET, "/v1/apps/com.example.other/webhooks", key: admin)
            #expect(otherApp.status == 404)
            let unknown = try await api.send(.DELETE, "\(path)/wh_0000000000000000", key: admin)
            #expect(unknown.status == 404 && unknown.errorCode == "unknown_webhook_endpoint", "\(unknown.text)")

            let removed = try await api.send(.DELETE, "\(path)/\(id)", key: admin)
            #expect(removed.status == 200 && removed.json["removedAt"] is String, "\(removed.text)")
            #expect((try await api.send(.GET, path, key: admin).json["endpoints"] as? [Any])?.isEmpty == true)
        }
    }
}
