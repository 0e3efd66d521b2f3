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

    /// How the app answers Apple's refund questions (Send Consumption Information); throws
    /// `AccessError` for an app that is not registered.
    func consumptionAnswerSettings(of bundleID: String) async throws -> ConsumptionAnswerSettings
}

/// Whether the ledger answers the app's CONSUMPTION_REQUESTs, and what it says of the app.
public struct ConsumptionAnswerSettings: Sendable, Hashable, Codable {
    /// On unless the app switched it off (`ledger apps consumption-answers`).
    public var answering: Bool
    /// `DECLINE`, `GRANT_FULL` or `GRANT_PRORATED`; nil for no preference.
    public var refundPreference: String?
    /// Whether the app gives a sample of its content (a trial, a preview) before the purchase.
    public var sampleContentProvided: Bool

    public static let refundPreferences = ["DECLINE", "GRANT_FULL", "GRANT_PRORATED"]

    public init(answering: Bool = true, refundPreference: String? = nil, sampleContentProvided: Bool = false) {
        self.answering = answering
        self.refundPreference = refundPreference
        self.sampleContentProvided = sampleContentProvided
    }
}
