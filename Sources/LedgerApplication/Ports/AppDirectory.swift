/// The apps the ledger serves and the keys that may call it, as the API and the use cases need
/// them: who a bearer key is, whether an app is registered, and the app's App Store secrets.
public protocol AppDirectory: Sendable {
    /// The unrevoked key this bearer token is, nil for anything else.
    func authenticate(_ token: String) async throws -> APIKey?

    /// Whether the app is registered (`ledger apps add`).
    func isRegistered(_ bundleID: String) async throws -> Bool

    /// Every registered app's bundle id.
    func bundleIDs() async throws -> [String]

    /// The app's App Store shared secret (for auto-renewable receipts), nil when it has none.
    /// Throws `SecretError` when it is stored but cannot be opened, `AccessError` for an app that
    /// is not registered.
    func sharedSecret(of bundleID: String) async throws -> String?

    /// The app's App Store Server API key, nil when it has none; errors as `sharedSecret(of:)`.
    func serverAPIKey(of bundleID: String) async throws -> ServerAPIKey?
}
