/// A key just created: the only moment its full text exists.
public struct IssuedAPIKey: Sendable {
    public let key: APIKey
    /// `lk_<keyId>_<secret>`: give it to the app's server; it cannot be shown again.
    public let token: String

    public init(key: APIKey, token: String) {
        self.key = key
        self.token = token
    }
}
