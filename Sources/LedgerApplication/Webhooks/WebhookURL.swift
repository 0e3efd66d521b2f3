import Foundation
import LedgerDomain

/// The URLs the ledger delivers to: https anywhere, http only to this machine (127.0.0.0/8, ::1,
/// localhost), where a test or a local relay listens. No credentials in the URL (they would be
/// shown by every listing); no fragment.
public enum WebhookURL {
    public static let maximumLength = 2048

    /// `text` checked, or why it is refused.
    @discardableResult
    public static func validate(_ text: String) throws(WebhookError) -> URL {
        guard !text.isEmpty, text.utf8.count <= maximumLength else {
            throw .invalidURL(text, "a URL has 1 to \(maximumLength) characters")
        }
        guard !text.unicodeScalars.contains(where: { $0.properties.isWhitespace || $0.isControlCharacter }),
              let url = URL(string: text), let scheme = url.scheme?.lowercased()
        else {
            throw .invalidURL(text, "it is not an absolute URL such as https://example.com/webhooks")
        }
        guard scheme == "https" || scheme == "http" else {
            throw .invalidURL(text, "the scheme is \(scheme); use https://")
        }
        guard let host = url.host, !host.isEmpty else {
            throw .invalidURL(text, "it names no host")
        }
        guard url.user == nil, url.password == nil else {
            throw .invalidURL(text, "it holds credentials, which every listing would show; authenticate with the signature instead")
        }
        guard url.fragment == nil else {
            throw .invalidURL(text, "a fragment (#…) is never sent; leave it out")
        }
        if scheme == "http", !isLoopback(host) {
            throw .invalidURL(text, "http:// is only allowed for loopback; use https:// (loopback: 127.0.0.0/8, ::1, localhost)")
        }
        return url
    }

    /// Whether `host` is this machine: localhost, 127.0.0.0/8 or ::1.
    public static func isLoopback(_ host: String) -> Bool {
        let host = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        if host == "localhost" || host == "::1" || host == "0:0:0:0:0:0:0:1" { return true }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts.allSatisfy({ !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isASCII) && UInt8($0) != nil }) else {
            return false
        }
        return parts[0] == "127"
    }
}
