import AppStore
import Crypto
import Foundation
import LedgerDomain

extension SimulatorStore {
    // MARK: App Store Server API

    /// Makes an App Store Server API key for the app, as App Store Connect does: the private key is
    /// handed out once (PEM) and the simulator keeps only the public key, to check tokens.
    func createAPIKey(bundleId: String) throws -> (keyID: String, issuerID: String, privateKeyPEM: String) {
        var app = try app(bundleId)
        let key = P256.Signing.PrivateKey()
        let keyID = String(UUID().uuidString.replacingOccurrences(of: "-", with: "").prefix(10)).uppercased()
        let issuerID = UUID().uuidString.lowercased()
        app.apiKeys[keyID] = (issuerID, key.publicKey.x963Representation)
        apps[bundleId] = app
        return (keyID, issuerID, key.pemRepresentation)
    }

    /// The issuer and public key of one of the app's API keys.
    func apiKey(bundleId: String, keyID: String) -> (issuerID: String, publicKey: Data)? {
        apps[bundleId]?.apiKeys[keyID]
    }

    /// Get Transaction History: every transaction of the user who made `transactionId` in the app,
    /// as StoreKit 2 knows them (no StoreKit 1 restores), oldest first; nil for an unknown transaction.
    func history(of transactionId: String, bundleId: String) -> [SimulatorTransaction]? {
        guard let transaction = transactions[transactionId], transaction.bundleId == bundleId else { return nil }
        let key = UserApp(userId: transaction.userId, bundleId: bundleId)
        materialize(key)
        return (transactionsByUser[key] ?? []).compactMap { transactions[$0] }
            .filter { $0.restoredTransactionId == nil }
            .sorted { ($0.purchaseDate, $0.transactionId) < ($1.purchaseDate, $1.transactionId) }
    }
}
