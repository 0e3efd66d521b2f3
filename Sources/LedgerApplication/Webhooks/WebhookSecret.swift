import Foundation

/// An endpoint's signing secret as Standard Webhooks writes it: `whsec_` and the base64 of the
/// key's bytes. The key is the decoded bytes, not the text.
public struct WebhookSecret: Sendable, Hashable {
    /// The key HMAC-SHA256 signs with.
    public let key: Data

    /// The prefix of the secret's text.
    public static let prefix = "whsec_"

    public init(key: Data) {
        self.key = key
    }

    /// The secret of `text` (`whsec_<base64>`); nil for anything else, or fewer than 24 bytes.
    public init?(text: String) {
        guard text.hasPrefix(Self.prefix), let key = Data(base64Encoded: String(text.dropFirst(Self.prefix.count))), key.count >= 24 else {
            return nil
        }
        self.key = key
    }

    /// A new secret of 32 random bytes.
    public static func generate() -> WebhookSecret {
        var generator = SystemRandomNumberGenerator()
        return WebhookSecret(key: Data((0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }))
    }

    /// `whsec_<base64 of the key>`: shown once, when the endpoint is added.
    public var text: String { Self.prefix + key.base64EncodedString() }
}
