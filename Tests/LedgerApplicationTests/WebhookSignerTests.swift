import Crypto
import Foundation
import LedgerApplication
import LedgerTesting
import Testing

@Suite("Webhook signatures as Standard Webhooks makes them")
struct WebhookSignerTests {
    @Test("the signer gives Standard Webhooks' own test vector")
    func standardVector() throws {
        let secret = try #require(WebhookSecret(text: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"))
        let signature = WebhookSigner(secret: secret).signature(id: "msg_p5jXN8AQM9LWM0D4loKWxJek", timestamp: 1_614_265_330, body: #"{"test": 2432232314}"#)
        #expect(signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
        // The vector docs/webhooks.md gives a verifier to test with.
        let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("docs/webhooks.md")
        let docs = try String(contentsOf: page, encoding: .utf8)
        #expect(docs.contains("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") && docs.contains(signature))
    }

    @Test("a delivery's headers verify by the documented recipe, and fail for a changed body, timestamp or secret")
    func verifiesByTheRecipe() throws {
        let secret = WebhookSecret.generate()
        let body = #"{"app":"com.example","id":"chg_12_0","position":12,"seq":0,"type":"renewal","userId":"u1"}"#
        let headers = Dictionary(uniqueKeysWithValues: WebhookSigner(secret: secret).headers(id: "chg_12_0", timestamp: 1_767_225_600, body: body)
            .map { ($0.name, $0.value) })
        #expect(headers["webhook-id"] == "chg_12_0" && headers["webhook-timestamp"] == "1767225600")
        #expect(headers["content-type"] == "application/json" && headers["user-agent"]?.contains("Ledger") == true)
        let signature = try #require(headers["webhook-signature"])
        #expect(WebhookVerification.verify(secret: secret.text, id: "chg_12_0", timestamp: "1767225600", signatureHeader: signature, body: Data(body.utf8)))
        #expect(!WebhookVerification.verify(secret: secret.text, id: "chg_12_0", timestamp: "1767225600", signatureHeader: signature,
                               body: Data(body.replacingOccurrences(of: "renewal", with: "refund").utf8)))
        #expect(!WebhookVerification.verify(secret: secret.text, id: "chg_12_0", timestamp: "1767225601", signatureHeader: signature, body: Data(body.utf8)))
        #expect(!WebhookVerification.verify(secret: WebhookSecret.generate().text, id: "chg_12_0", timestamp: "1767225600", signatureHeader: signature,
                               body: Data(body.utf8)))
    }

    @Test("a fixed key and body give a fixed signature, the one Python's hmac gives")
    func fixedVector() throws {
        let secret = WebhookSecret(key: Data(0..<32))
        #expect(secret.text == "whsec_AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        let body = #"{"app":"com.example","id":"chg_12_0","position":12,"seq":0,"type":"renewal","userId":"u1"}"#
        #expect(WebhookSigner(secret: secret).signature(id: "chg_12_0", timestamp: 1_767_225_600, body: body)
            == "v1,bbPhOB5Y+Km+DtUugGU5XXz8dUyRlYohSB6njbxcbP0=")
    }

    @Test("a secret is whsec_ and 32 random bytes; text that is not one is refused")
    func secrets() {
        let one = WebhookSecret.generate(), two = WebhookSecret.generate()
        #expect(one.key.count == 32 && one != two)
        #expect(WebhookSecret(text: one.text) == one)
        #expect(WebhookSecret(text: "sk_" + one.key.base64EncodedString()) == nil)
        #expect(WebhookSecret(text: "whsec_not base64") == nil)
    }

    @Test("change ids are chg_<position>_<seq> and nothing else")
    func changeIDs() {
        #expect(WebhookChangeID("chg_12_0") == WebhookChangeID(position: 12, seq: 0))
        #expect(WebhookChangeID(position: 7, seq: 3).description == "chg_7_3")
        for bad in ["chg_0_0", "chg_12", "chg_12_-1", "chg_a_0", "wh_12_0", "chg_12_0_1", ""] { #expect(WebhookChangeID(bad) == nil, "\(bad)") }
    }
}
