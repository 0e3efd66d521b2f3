/// An app's App Store Server API key as App Store Connect issued it, the private key opened.
public struct ServerAPIKey: Sendable, Hashable {
    public let keyID: String
    public let issuerID: String
    /// The `.p8` file's PEM text.
    public let privateKeyPEM: String

    public init(keyID: String, issuerID: String, privateKeyPEM: String) {
        self.keyID = keyID
        self.issuerID = issuerID
        self.privateKeyPEM = privateKeyPEM
    }
}
