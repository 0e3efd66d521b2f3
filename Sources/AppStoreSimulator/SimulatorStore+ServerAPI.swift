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

    /// A key made elsewhere, taken as the app's.
    func addAPIKey(bundleId: String, keyID: String, issuerID: String, privateKeyPEM: String) throws {
        var app = try app(bundleId)
        let key: P256.Signing.PrivateKey
        do { key = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM) } catch {
            throw SimulatorError.badRequest("privateKey is not a P-256 private key in PEM: \(error)")
        }
        app.apiKeys[keyID] = (issuerID, key.publicKey.x963Representation)
        apps[bundleId] = app
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

extension SimulatorStore {
    /// One of the next Server API calls told to slow down (the `serverAPITooManyRequests` fault)?
    func takeTooManyRequests() -> Bool {
        guard faults.serverAPITooManyRequests > 0 else { return false }
        faults.serverAPITooManyRequests -= 1
        return true
    }

    /// Get All Subscription Statuses: each subscription of the user who made `transactionId`, by
    /// group, its latest period and Apple's status (1 active, 2 expired, 3 billing retry, 4 grace
    /// period, 5 revoked); nil for an unknown transaction.
    func statuses(of transactionId: String, bundleId: String) -> [(group: String, status: Int, view: SubscriptionView)]? {
        guard let transaction = transactions[transactionId], transaction.bundleId == bundleId else { return nil }
        let key = UserApp(userId: transaction.userId, bundleId: bundleId)
        materialize(key)
        return subscriptionViews(key).map { view in
            let status = view.latest.cancellationDate != nil && !view.latest.isUpgraded ? 5
                : view.isActive ? 1
                : view.gracePeriodExpiresDate.map { $0 > now } == true ? 4
                : view.isInBillingRetry ? 3 : 2
            return (view.latest.subscriptionGroupIdentifier ?? "", status, view)
        }
    }

    /// The order id on the customer's e-mail receipt of a purchase, as Apple prints it.
    static func orderId(of transaction: SimulatorTransaction) -> String {
        "M" + String(SimulatorResponseRenderer.stableNumber("order-" + transaction.transactionId) % 10_000_000_000)
    }

    /// Look Up Order ID: the app's transactions of the order; nil for an order Apple knows nothing
    /// of for the app.
    func order(_ orderId: String, bundleId: String) -> [SimulatorTransaction]? {
        let found = transactions.values.filter { $0.bundleId == bundleId && Self.orderId(of: $0) == orderId }
        return found.isEmpty ? nil : found.sorted { $0.transactionId < $1.transactionId }
    }

    /// Send Consumption Information received: kept, in the order they came.
    func recordConsumption(transactionId: String, body: [String: Any], at date: Date) throws -> SimulatorTransaction? {
        guard let transaction = transactions[transactionId] else { return nil }
        consumptionSent.append(ConsumptionSent(transactionId: transactionId, productType: transaction.productType.rawValue,
                                               body: String(decoding: try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys]), as: UTF8.self),
                                               receivedAt: date))
        return transaction
    }

    func transaction(_ id: String) -> SimulatorTransaction? { transactions[id] }
}

/// What Send Consumption Information told the simulator.
struct ConsumptionSent: Encodable, Sendable {
    let transactionId: String
    let productType: String
    /// The request's JSON, keys sorted.
    let body: String
    let receivedAt: Date
}
