import LedgerApplication
import Testing

@Suite("The URLs webhooks are sent to")
struct WebhookURLTests {
    @Test("https anywhere; http only to loopback, and the refusal says so")
    func schemes() throws {
        for url in ["https://example.com/hooks", "https://10.0.0.1:8443/x", "http://127.0.0.1:9000/hook", "http://127.8.9.10/hook",
                    "http://localhost:8080/", "http://[::1]:8080/hook"] {
            #expect(throws: Never.self, "\(url)") { try WebhookURL.validate(url) }
        }
        let error = try #require(throws: WebhookError.self) { try WebhookURL.validate("http://example.com/hooks") }
        #expect(error.code == .invalidURL && error.message.contains("http:// is only allowed for loopback; use https://"), "\(error.message)")
        for url in ["http://128.0.0.1/", "http://127.0.0.1.example.com/", "http://localhost.example.com/", "http://10.0.0.1/"] {
            #expect(throws: WebhookError.self, "\(url)") { try WebhookURL.validate(url) }
        }
    }

    @Test("no other scheme, no relative URL, no credentials, no fragment, nothing over 2048 characters")
    func shapes() {
        for (url, says) in [("ftp://example.com/x", "scheme"), ("/hooks", "absolute"), ("https:///x", "host"),
                            ("https://user:pw@example.com/", "credentials"), ("https://example.com/#x", "fragment"),
                            ("https://example.com/" + String(repeating: "a", count: 2048), "2048"), ("https://exa mple.com/", "absolute")] {
            let error = #expect(throws: WebhookError.self, "\(url)") { try WebhookURL.validate(url) }
            #expect(error?.message.contains(says) == true, "\(url): \(error?.message ?? "")")
        }
    }
}
