import Foundation
import LedgerApplication
import Synchronization

/// `AppDirectory` in memory: registered apps with their secrets, and bearer tokens with their keys.
public final class InMemoryAppDirectory: AppDirectory, Sendable {
    private struct State {
        var apps: [String: (sharedSecret: String?, serverAPIKey: ServerAPIKey?)] = [:]
        var keys: [String: APIKey] = [:]
        var consumptionAnswers: [String: ConsumptionAnswerSettings] = [:]
    }

    private let state = Mutex(State())

    public init() {}

    /// Registers an app (as `ledger apps add`).
    public func addApp(_ bundleID: String, sharedSecret: String? = nil, serverAPIKey: ServerAPIKey? = nil) {
        state.withLock { $0.apps[bundleID] = (sharedSecret, serverAPIKey) }
    }

    /// A key of the app with these scopes; returns its bearer token.
    @discardableResult
    public func createKey(app: String, scopes: Set<APIScope>, name: String? = nil) -> String {
        let id = UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(12)
        let token = "lk_\(id)_\(UUID().uuidString.lowercased())"
        let key = APIKey(keyId: String(id), app: app, scopes: scopes, name: name, createdAt: Date(), revokedAt: nil)
        state.withLock { $0.keys[token] = key }
        return token
    }

    public func authenticate(_ token: String) async throws -> APIKey? {
        state.withLock { $0.keys[token] }.flatMap { $0.isRevoked ? nil : $0 }
    }

    public func isRegistered(_ bundleID: String) async throws -> Bool {
        state.withLock { $0.apps[bundleID] != nil }
    }

    public func bundleIDs() async throws -> [String] {
        state.withLock { $0.apps.keys.sorted() }
    }

    public func sharedSecret(of bundleID: String) async throws -> String? {
        guard let app = state.withLock({ $0.apps[bundleID] }) else { throw AccessError.unknownApp(bundleID) }
        return app.sharedSecret
    }

    public func serverAPIKey(of bundleID: String) async throws -> ServerAPIKey? {
        guard let app = state.withLock({ $0.apps[bundleID] }) else { throw AccessError.unknownApp(bundleID) }
        return app.serverAPIKey
    }

    public func consumptionAnswerSettings(of bundleID: String) async throws -> ConsumptionAnswerSettings {
        try state.withLock { state in
            guard state.apps[bundleID] != nil else { throw AccessError.unknownApp(bundleID) }
            return state.consumptionAnswers[bundleID] ?? ConsumptionAnswerSettings()
        }
    }

    /// Sets how the app answers Apple's refund questions (as `ledger apps consumption-answers`).
    public func setConsumptionAnswerSettings(_ settings: ConsumptionAnswerSettings, of bundleID: String) {
        state.withLock { $0.consumptionAnswers[bundleID] = settings }
    }
}
